"""Every kind of configuration error names the exact file:line:col and key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.config import ConfigIssue, InvalidConfigError, load_config
from airlock.errors import ConfigError

Write = Callable[..., Path]
One = Callable[[Path], str]
Issues = Callable[[Path], list[ConfigIssue]]

AGENT = """\
agents:
  coder:
    provider: {kind: scripted, script: []}
"""


def test_unknown_key_lists_valid_keys(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    netwrok:\n      allow: []\n")
    assert one_issue(path) == (
        f"{path}:4:5: agents.coder.netwrok: unknown key 'netwrok'; valid keys: approval, artifacts, backend, "
        "context, credentials, defaults, durability, effects, hooks, input_files, isolation, limits, "
        "mcp_servers, memory, middleware, network, placement, provider, resources, system, tool_options, "
        "tools, tree_budget, turn"
    )


def test_unknown_nested_key(write: Write, one_issue: One) -> None:
    path = write(
        """
        agents:
          coder:
            provider: {kind: scripted, script: []}
            network:
              allow:
                - destination: example.com
                  prot: 443
        """
    )
    assert one_issue(path) == (
        f"{path}:7:11: agents.coder.network.allow[0].prot: unknown key 'prot'; "
        "valid keys: destination, namespace, pods, port, service, target_port"
    )


def test_unknown_key_inside_agent_spec_part(write: Write, one_issue: One) -> None:
    path = write(AGENT.replace("script: []}", "script: [], modle: x}"))
    assert one_issue(path) == (
        f"{path}:3:44: agents.coder.provider.modle: unknown key 'modle'; valid keys: api_key_env, "
        "base_url, compaction, kind, max_retries, max_tokens, model, name, options, "
        "parallel_tool_calls, price_per_mtok_in, price_per_mtok_out, reasoning_effort, response_format, "
        "script, temperature, thinking, timeout_s, tool_choice_after_failure, tool_choice_first"
    )


def test_unknown_top_level_key(write: Write, one_issue: One) -> None:
    path = write("agent:\n  coder: {}\n")
    assert one_issue(path) == (
        f"{path}:1:1: agent: unknown key 'agent'; "
        "valid keys: agents, auth, backends, defaults, pool, retention, secrets, version"
    )


def test_bad_type(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    defaults:\n      max_turns: many\n")
    assert one_issue(path) == f"{path}:5:7: agents.coder.defaults.max_turns: Input should be a valid integer"


def test_bad_port(write: Write, one_issue: One) -> None:
    path = write(
        """
        agents:
          coder:
            provider: {kind: scripted, script: []}
            network:
              allow:
                - {destination: api.example.com, port: 443}
                - {destination: api.example.org, port: 70000}
        """
    )
    assert one_issue(path) == (
        f"{path}:7:42: agents.coder.network.allow[1].port: Input should be less than or equal to 65535"
    )


def test_missing_required_key_points_at_its_parent(write: Write, one_issue: One) -> None:
    path = write("agents:\n  coder:\n    provider:\n      model: x\n")
    assert one_issue(path) == f"{path}:3:5: agents.coder.provider.kind: Field required"


@pytest.mark.parametrize("key", ["value", "token", "password", "api_key"])
def test_literal_secret_value_in_secrets_is_rejected_without_echoing_it(
    write: Write, one_issue: One, key: str
) -> None:
    path = write(f"secrets:\n  anthropic-api-key:\n    {key}: sk-ant-api03-verysecret\n" + AGENT)
    text = one_issue(path)
    assert text.startswith(
        f"{path}:3:5: secrets.anthropic-api-key.{key}: literal secret values are not allowed"
    )
    assert "verysecret" not in text


def test_literal_secret_value_in_credentials_is_rejected(write: Write, issues: Issues) -> None:
    path = write(
        AGENT
        + """    credentials:
      - secret: github-token
        value: ghp_abcdefABCDEF0123456789abcdef
        inject: sidecar
"""
    )
    found = issues(path)
    assert [(i.line, i.column, i.key) for i in found] == [(6, 9, "agents.coder.credentials[0].value")]
    assert "literal secret values are not allowed" in found[0].message
    assert all("ghp_" not in str(i) for i in found)


def test_secret_value_pasted_where_a_name_belongs(write: Write, issues: Issues) -> None:
    path = write(
        """
        secrets:
          gh: {env: ghp_abcdefABCDEF0123456789abcdef}
        agents:
          coder:
            provider: {kind: scripted, script: []}
            credentials:
              - {secret: sk-ant-api03-abcdefABCDEF0123456789, inject: sidecar}
        """
    )
    found = issues(path)
    assert [(i.line, i.column, i.key) for i in found] == [
        (2, 8, "secrets.gh.env"),
        (7, 10, "agents.coder.credentials[0].secret"),
    ]
    assert "NAME of an environment variable" in found[0].message
    assert "looks like a secret value" in found[1].message
    assert all("abcdef" not in str(i) for i in found)


def test_unknown_tool_points_at_the_list_item(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    tools:\n      - calculator\n      - rm_rf\n")
    assert one_issue(path) == (
        f"{path}:6:9: agents.coder.tools[1]: unknown tool(s) rm_rf; valid tools: bash, calculator, "
        "delegate, delete_memory, edit_file, handoff, http_request, list_files, read_file, read_memory, "
        "search_memory, signal, write_file, write_memory, or a custom tool by import path "
        "(package.module:function)"
    )


def test_unknown_provider(write: Write, one_issue: One) -> None:
    path = write("agents:\n  coder:\n    provider:\n      kind: antropic\n")
    assert one_issue(path) == (
        f"{path}:4:7: agents.coder.provider.kind: unknown provider 'antropic'; "
        "valid providers: anthropic, openai_compat, scripted, command, custom"
    )


def test_backend_settings_are_checked_by_the_backends_own_model(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    backend: kubernetes\nbackends:\n  kubernetes: {namespace: Bad_NS}\n")
    assert one_issue(path) == (
        f"{path}:6:16: backends.kubernetes.namespace: 'Bad_NS' is not a valid namespace name (RFC 1123 label)"
    )
    path = write(AGENT + "backends:\n  kubernetes: {namespac: x}\n")
    issue = one_issue(path)
    assert issue.startswith(
        f"{path}:5:16: backends.kubernetes.namespac: unknown key 'namespac'; valid keys: "
    )
    assert ", connect, " in issue
    path = write(AGENT + "backends:\n  process: {}\n")
    assert one_issue(path) == f"{path}:5:3: backends.process: backend 'process' takes no settings"
    path = write(AGENT + "backends:\n  docker: {runtimes: {gvisr: x}}\n")
    assert one_issue(path) == (
        f"{path}:5:23: backends.docker.runtimes.gvisr: unknown key 'gvisr'; "
        "valid keys: gvisor, gvisor_networked, micro_vm"
    )
    path = write(AGENT + "backends:\n  docker: {isolation_floor: micro_vm}\n")
    assert "backends.docker.isolation_floor" in one_issue(path)


def test_isolation_is_never_downgraded_by_the_backend(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    backend: process\n    isolation: [process, gvisor]\n")
    assert one_issue(path) == (
        f"{path}:5:26: agents.coder.isolation[1]: backend 'process' cannot provide 'gvisor' isolation "
        "(it provides: process); isolation is never downgraded"
    )


def test_a_backend_refuses_settings_it_cannot_enforce(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    backend: process\n    resources: {memory: 1Gi}\n")
    assert one_issue(path) == (
        f"{path}:5:5: agents.coder.resources: backend 'process' cannot enforce `resources` (the runner "
        "as a local process of your user: no network, resource or credential isolation); use backend docker"
    )


def test_undeclared_secret(write: Write, one_issue: One) -> None:
    path = write(
        "secrets:\n  a: {env: A}\n"
        + AGENT
        + "    credentials:\n      - {secret: anthropic-api-key, inject: {env_var: KEY}}\n"
    )
    assert one_issue(path) == (
        f"{path}:7:10: agents.coder.credentials[0].secret: secret 'anthropic-api-key' is not declared "
        "under the top-level `secrets:` (declared: a)"
    )


def test_unsafe_policy_is_rejected_at_config_time_at_the_rule(write: Write, one_issue: One) -> None:
    path = write(
        """
        secrets:
          anthropic-api-key: {env: ANTHROPIC_API_KEY}
        agents:
          coder:
            provider: {kind: anthropic, model: claude-haiku-4-5}
            network:
              allow:
                - {destination: api.anthropic.com, port: 443}
                - {destination: 0.0.0.0/0}
            credentials:
              - {secret: anthropic-api-key, inject: sidecar}
        """
    )
    assert one_issue(path) == (
        f"{path}:9:11: agents.coder.network.allow[1]: allow 0.0.0.0/0 (agents.coder.network.allow[1]) "
        "allows every destination: with credentials configured, egress must be an explicit allow-list "
        "(a compromised agent could send a credential anywhere)"
    )


def test_sidecar_route_must_be_allowed(write: Write, one_issue: One) -> None:
    path = write(
        """
        secrets:
          anthropic-api-key: {env: ANTHROPIC_API_KEY}
        agents:
          coder:
            provider: {kind: anthropic}
            credentials:
              - {secret: anthropic-api-key, inject: sidecar}
        """
    )
    assert one_issue(path).startswith(
        f"{path}:7:9: agents.coder.credentials[0]: secret 'anthropic-api-key': the sidecar forwards to "
        "api.anthropic.com:443, which no allow rule permits"
    )


def test_bad_duration_and_float_cost(write: Write, issues: Issues) -> None:
    path = write(AGENT + "    defaults:\n      max_cost: 0.5\n      max_duration: 5 minutes\n")
    assert [str(i) for i in issues(path)] == [
        f'{path}:5:7: agents.coder.defaults.max_cost: a Decimal must be given as a string (e.g. "0.0123"), '
        "not a JSON number",
        f"{path}:6:7: agents.coder.defaults.max_duration: invalid duration '5 minutes'; use e.g. \"90s\", "
        '"5m", "1h30m", "250ms" or integer milliseconds',
    ]


def test_duplicate_key_in_one_mapping(write: Write, one_issue: One) -> None:
    path = write(AGENT + "    tools: [bash]\n    tools: [calculator]\n")
    assert one_issue(path) == f"{path}:5:5: agents.coder.tools: duplicate key (first defined at line 4)"


def test_yaml_syntax_error(write: Write, one_issue: One) -> None:
    path = write("agents:\n  coder:\n    provider: {kind: scripted\n")
    assert one_issue(path).startswith(f"{path}:4:1: while parsing a flow mapping")


def test_duplicate_agent_names_across_files_name_both(write: Write, one_issue: One) -> None:
    first = write(AGENT, "airlock.d/10-a.yaml")
    second = write("# second\n" + AGENT, "airlock.d/20-b.yaml")
    assert one_issue(first.parent) == (
        f"{second}:3:3: agents.coder: agent 'coder' is defined twice: {first}:2:3 and {second}:3:3"
    )


def test_all_problems_are_reported_in_order(write: Write, issues: Issues) -> None:
    path = write(
        """
        agents:
          a:
            provider: {kind: nope}
          b:
            provider: {kind: scripted, script: []}
            resources: {cpu: lots}
        """
    )
    assert [(i.line, i.key) for i in issues(path)] == [
        (3, "agents.a.provider.kind"),
        (6, "agents.b.resources.cpu"),
    ]


def test_missing_script_file(write: Write, one_issue: One) -> None:
    path = write("agents:\n  d:\n    provider: {kind: scripted, script: scripts/none.yaml}\n")
    missing = str(path.parent / "scripts/none.yaml")
    assert one_issue(path) == f"{path}:3:32: agents.d.provider.script: script file {missing!r} not found"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"configuration .*nope\.yaml \(the given path\) does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_empty_file_has_no_agents(write: Write) -> None:
    path = write("# nothing yet\n")
    with pytest.raises(InvalidConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: agents: no agents defined"


def test_an_explicitly_empty_agents_mapping_loads(write: Write) -> None:
    """What the Helm chart renders before any agent is configured: the controller starts and
    refuses every job (its isolation test's agents are not in this file)."""
    path = write("agents: {}\n")
    assert load_config(path).agents == {}


def test_invalid_config_error_is_a_config_error() -> None:
    assert issubclass(InvalidConfigError, ConfigError)

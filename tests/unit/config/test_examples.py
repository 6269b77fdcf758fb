"""The shipped examples/airlock.yaml loads, and each agent keeps its own sandbox."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from airlock.config import LOCAL_MODEL, AgentConfig, AirlockConfig, load_config
from airlock.errors import ConfigError
from layer0 import ContainerIsolation, NetworkAction

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture(scope="module")
def config() -> AirlockConfig:
    return load_config(EXAMPLES / "airlock.yaml")


def rules(agent: AgentConfig) -> list[tuple[str, int | None, str]]:
    assert agent.environment.network is not None
    return [(r.destination, r.port, r.action.value) for r in agent.environment.network.rules]


def test_example_defines_the_documented_agents(config: AirlockConfig) -> None:
    assert sorted(config.agents) == [
        "budgeted",
        "careful",
        "coder",
        "demo",
        "demo-claude",
        "demo-scripted",
        "offline-coder",
        "planner",
        "researcher",
    ]
    assert config.files == (EXAMPLES / "airlock.yaml",)
    assert config.agent("coder").line == 23
    assert config.agent("demo").source == EXAMPLES / "airlock.yaml"


def test_the_offline_coder_runs_on_the_local_model_with_shell_and_file_tools_only(
    config: AirlockConfig,
) -> None:
    agent = config.agent("offline-coder")
    assert agent.uses_local_model and agent.spec.provider.kind == "openai_compat"
    assert agent.spec.tools == ["bash", "read_file", "write_file"]
    assert agent.spec.provider.tool_choice_first == "required"
    assert agent.spec.provider.tool_choice_after_failure == "required"
    assert agent.spec.provider.parallel_tool_calls is False
    assert agent.spec.provider.temperature == 0
    assert agent.environment.network is not None
    assert [r.destination for r in agent.environment.network.rules] == ["local-model"]
    assert not agent.spec.mcp_servers and not agent.spec.custom_tools


def test_every_example_agent_is_deny_all_except_its_allow_list(config: AirlockConfig) -> None:
    for agent in config.agents.values():
        assert agent.backend == "docker"
        assert agent.environment.isolation == [ContainerIsolation()]
        assert agent.environment.network is not None
        assert agent.environment.network.default is NetworkAction.DENY
        assert agent.plan().egress.default == "deny"


def test_agents_in_one_file_have_different_sandboxes(config: AirlockConfig) -> None:
    coder, researcher = config.agent("coder"), config.agent("researcher")
    assert rules(coder) == [("api.anthropic.com", 443, "allow")]
    assert rules(researcher) == [("api.github.com", 443, "allow"), ("api.anthropic.com", 443, "allow")]
    assert rules(config.agent("demo-scripted")) == []
    assert coder.environment.resources is not None and researcher.environment.resources is not None
    assert (coder.environment.resources.cpu, coder.environment.resources.memory) == ("1", "512Mi")
    assert coder.environment.resources.disk == "1Gi"
    assert (researcher.environment.resources.cpu, researcher.environment.resources.memory) == (
        "500m",
        "256Mi",
    )
    assert coder.spec.tools == ["bash", "read_file", "write_file", "list_files", "edit_file"]
    assert researcher.spec.tools == ["http_request"]
    assert coder.spec.tool_options == {"bash": {"timeout_s": 60}}
    assert coder.spec.context.strategy == "sliding_window"


def test_credentials_are_names_with_sidecar_injection(config: AirlockConfig) -> None:
    researcher = config.agent("researcher")
    creds = [(c.name, c.injection.kind) for c in researcher.environment.credentials]
    assert creds == [("anthropic-api-key", "sidecar"), ("github-token", "sidecar")]
    route = researcher.sidecar_routes["github-token"]
    assert (route.upstream, route.header, route.value_prefix) == (
        "https://api.github.com",
        "authorization",
        "Bearer ",
    )
    placements = {c.name: c for c in researcher.plan().credentials}
    assert placements["anthropic-api-key"].route is not None
    assert placements["anthropic-api-key"].route.host == "api.anthropic.com"
    assert not any(p.enters_sandbox for p in placements.values())
    assert researcher.secrets["github-token"].env == "GITHUB_TOKEN"
    assert config.agent("demo").secrets == {}


def test_defaults_merge_top_level_under_agent(config: AirlockConfig) -> None:
    coder = config.agent("coder")
    assert (
        coder.spec.defaults.max_turns,
        coder.spec.defaults.max_cost,
        coder.spec.defaults.max_duration,
    ) == (
        30,
        Decimal("1.00"),
        600_000,
    )
    demo = config.agent("demo")
    assert (demo.spec.defaults.max_turns, demo.spec.defaults.max_cost, demo.spec.defaults.max_duration) == (
        6,
        None,
        180_000,
    )
    budgeted = config.agent("budgeted")
    assert str(budgeted.spec.defaults.max_cost) == "0.25"
    assert budgeted.spec.defaults.max_duration == 90_000
    assert [(h.name, h.options) for h in budgeted.spec.hooks] == [
        ("budget", {"max_cost": "0.20", "warn_at": "0.80"})
    ]


def test_scripted_demo_points_at_an_existing_script(config: AirlockConfig) -> None:
    demo = config.agent("demo-scripted")
    assert demo.spec.provider.kind == "scripted"
    assert demo.spec.provider.script == str(EXAMPLES / "scripts" / "calculator.yaml")
    assert demo.spec.tools == ["calculator"]
    assert not demo.uses_local_model


def test_local_model_placeholder_is_resolved_for_the_cli(config: AirlockConfig) -> None:
    demo = config.agent("demo")
    assert demo.uses_local_model
    assert demo.spec.provider.base_url == LOCAL_MODEL
    resolved = demo.running().with_local_model("http://172.17.0.1:8765/v1")
    assert resolved.spec.provider.base_url == "http://172.17.0.1:8765/v1"
    assert rules(resolved) == [("172.17.0.1/32", 8765, "allow")]
    assert not resolved.uses_local_model
    assert resolved.plan().egress.rules[0].kind == "cidr"
    by_name = demo.running().with_local_model("http://model-host:9000/v1")
    assert rules(by_name) == [("model-host", 9000, "allow")]
    assert demo.spec.provider.base_url == LOCAL_MODEL  # the original is unchanged
    with pytest.raises(ConfigError, match="http"):
        demo.running().with_local_model("model-host:9000")


def test_unknown_agent_lists_defined_ones(config: AirlockConfig) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown agent 'nope'; defined agents: budgeted, careful, coder, demo"
    ):
        config.agent("nope")


def test_the_scripted_demo_script_is_in_the_scripted_providers_format(config: AirlockConfig) -> None:
    from airlock.providers import load_script

    script = load_script(EXAMPLES / "scripts" / "calculator.yaml")
    assert [s.response.stop_reason.value for s in script.steps] == ["tool_use", "end_turn"]
    first, last = (s.response.model_dump(mode="json") for s in script.steps)
    assert first["content"][0]["name"] == "calculator"
    assert first["content"][0]["input"] == {"expression": "17 * 23"}
    assert last["content"][0]["text"] == "17 x 23 = 391."


def test_demo_claude_gets_its_key_only_through_the_sidecar(config: AirlockConfig) -> None:
    agent = config.agent("demo-claude")
    plan = agent.plan()
    (cred,) = plan.credentials
    assert cred.kind == "sidecar" and not cred.enters_sandbox
    assert cred.route is not None and cred.route.upstream == "https://api.anthropic.com"
    assert [(r.destination, r.port) for r in plan.egress.rules] == [("api.anthropic.com", 443)]
    assert agent.spec.tools == ["calculator"] and agent.spec.provider.kind == "anthropic"


def test_example_effect_policies(config: AirlockConfig) -> None:
    coder = config.agent("coder").effects
    assert (coder.delegate, coder.handoff, coder.memory, coder.signal) == (
        ("researcher",),
        (),
        ("session",),
        (),
    )
    assert (coder.max_effects, coder.max_value_bytes) == (32, 262144)
    assert config.agent("planner").effects.delegate == ("demo-scripted",)
    # Every other agent keeps the default: nothing but its own session.
    assert all(
        a.effects.delegate == () and a.effects.memory == ("session",)
        for a in config.agents.values()
        if a.name not in ("coder", "planner")
    )


def test_the_careful_agent_waits_for_alice_or_bob_before_any_shell_call(config: AirlockConfig) -> None:
    careful = config.agent("careful")
    assert careful.spec.approval is not None and careful.spec.approval.needs("bash")
    assert careful.approval is not None
    assert (careful.approval.approvers, careful.approval.strategy) == (("alice", "bob"), "any")
    assert careful.approval.on_timeout == "reject" and careful.approval.timeout_ms == 3_600_000

"""The chart's values mean what airlock.yaml means: the agent config the chart renders loads
exactly as the same agents written by hand; values.schema.json refuses at install what the
controller would refuse at start (a bad CIDR, an unknown isolation, a negative limit, ...),
naming the value's path; its enums are airlock's own lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.config import AirlockConfig, InvalidConfigError, load_config
from airlock.config._schema import SANDBOX_KEYS
from airlock.errors import ConfigError
from airlock.policy import ClusterService
from airlock.sandbox.kubernetes import DnsPeers, DnsSelector, KubernetesSettings
from airlock.spec import PROVIDER_KINDS, AgentSpec
from tests.support.helm import CHART, helm, objects, render, render_notes

DATA = Path(__file__).resolve().parent / "data"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
PROBE_AGENTS = {"airlock-probe-deny", "airlock-probe-allow"}


def chart_config(
    tmp_path: Path, *values: Path, sets: tuple[str, ...] = (), suffix: str = "-config"
) -> AirlockConfig:
    """The controller's config as the chart renders it (``suffix="-probe"``: the isolation
    test's own), loaded by airlock.config."""
    found = objects(render(*values, sets=sets))
    (config_map,) = [o for o in found if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith(suffix)]
    path = tmp_path / f"airlock{suffix}.yaml"
    path.write_text(config_map["data"]["airlock.yaml"])
    return load_config(path)


def comparable(config: AirlockConfig) -> dict[str, Any]:
    return {
        name: agent.model_dump(mode="json", exclude={"source", "line"})
        for name, agent in config.agents.items()
    }


def test_the_rendered_agents_load_exactly_as_the_same_airlock_yaml(tmp_path: Path) -> None:
    from_chart = chart_config(tmp_path, CHART / "examples" / "multi-agent.yaml")
    by_hand = load_config(DATA / "multi-agent.airlock.yaml")
    assert comparable(from_chart) == comparable(by_hand)
    assert set(comparable(from_chart)) == {"coder", "researcher"}
    assert from_chart.secrets == by_hand.secrets
    assert from_chart.settings_of("kubernetes") is not None


@pytest.mark.parametrize("example", ["default", "gvisor", "external-secrets"])
def test_every_example_loads_in_the_controller(example: str, tmp_path: Path) -> None:
    values = () if example == "default" else (CHART / "examples" / f"{example}.yaml",)
    config = chart_config(tmp_path, *values)
    assert all(agent.backend == "kubernetes" for agent in config.agents.values())
    assert not set(config.agents) & PROBE_AGENTS  # never a standing probe agent
    assert not [name for name in config.secrets if "probe" in name]
    if example != "external-secrets":  # the isolation test's own config, served by its pod
        probe = chart_config(tmp_path, *values, suffix="-probe")
        assert set(probe.agents) == PROBE_AGENTS
        assert probe.settings_of("kubernetes") == config.settings_of("kubernetes").model_copy(  # type: ignore[union-attr]
            update={
                "controller_pod_labels": {
                    "app.kubernetes.io/instance": "rel",
                    "app.kubernetes.io/component": "isolation-probe",
                },
                # never the production controller's identity (it would retire its sandboxes)
                "owner_identity": "rel-airlock-probe",
                "network_policy": "assume_enforced",  # it measures each hole itself
                "pull_secrets_from": None,
            }
        )


def test_the_probe_agents_are_deny_all_and_one_allowed_destination(tmp_path: Path) -> None:
    config = chart_config(tmp_path, CHART / "examples" / "multi-agent.yaml", suffix="-probe")
    deny, allow = config.agents["airlock-probe-deny"], config.agents["airlock-probe-allow"]
    assert deny.plan().needs_egress_proxy is False and not deny.environment.credentials
    (rule,) = allow.plan().egress.rules  # the probe's Service by name: no CIDR, no pod network
    probe_pods = {"app.kubernetes.io/instance": "rel", "app.kubernetes.io/component": "isolation-probe"}
    assert rule.service == ClusterService(name="rel-airlock-probe", namespace="airlock", pods=probe_pods)
    assert (rule.port, rule.action) == (8080, "allow")
    (credential,) = allow.environment.credentials
    assert credential.name == "airlock-probe-canary"
    upstream = allow.sidecar_routes["airlock-probe-canary"].upstream
    assert upstream == "http://rel-airlock-probe.airlock.svc:8080"
    assert config.secrets["airlock-probe-canary"].file == "/var/run/airlock/probe/canary"


def test_dns_peers_for_node_local_dns_and_openshift_reach_the_backend(tmp_path: Path) -> None:
    values = tmp_path / "dns.yaml"
    selector = {
        "namespace": "openshift-dns",
        "podLabels": {"dns.operator.openshift.io/daemonset-dns": "default"},
    }
    dns = {"selectors": [selector], "ipBlocks": ["169.254.20.10", "10.96.0.10/32"], "ports": [53, 5353]}
    values.write_text(yaml.safe_dump({"sandbox": {"dns": dns}}))
    settings = chart_config(tmp_path, values).settings_of("kubernetes")
    assert isinstance(settings, KubernetesSettings)
    assert settings.dns == DnsPeers(
        selectors=(DnsSelector(namespace="openshift-dns", pod_labels=selector["podLabels"]),),
        ip_blocks=("169.254.20.10/32", "10.96.0.10/32"),
        ports=(53, 5353),
    )


# --- what the schema refuses ----------------------------------------------------------------

GOOD_AGENT: dict[str, Any] = {"provider": {"kind": "anthropic", "model": "m"}, "tools": ["bash"]}

#: (case, a change to one agent, the path helm names)
BAD_AGENTS: list[tuple[str, dict[str, Any], str]] = [
    ("CIDR prefix", {"network": {"allow": [{"destination": "10.0.0.0/33"}]}}, "network.allow.0.destination"),
    ("IPv4 octet", {"network": {"allow": [{"destination": "300.1.2.3"}]}}, "network.allow.0.destination"),
    ("wildcard", {"network": {"deny": [{"destination": "api.*.com"}]}}, "network.deny.0.destination"),
    ("port", {"network": {"allow": [{"destination": "example.com", "port": 70000}]}}, "network.allow.0.port"),
    ("isolation", {"isolation": ["wasm"]}, "isolation.0"),
    ("isolation object", {"isolation": [{"type": "firecracker"}]}, "isolation.0"),
    ("max_turns", {"defaults": {"max_turns": -1}}, "defaults.max_turns"),
    ("max_cost", {"defaults": {"max_cost": "-0.5"}}, "defaults.max_cost"),
    ("max_duration", {"defaults": {"max_duration": "-5m"}}, "defaults.max_duration"),
    ("cpu", {"resources": {"cpu": "-1"}}, "resources.cpu"),
    ("memory zero", {"resources": {"memory": "0Mi"}}, "resources.memory"),
    ("circuit breaker", {"limits": {"circuit_breaker_threshold": 0}}, "limits.circuit_breaker_threshold"),
    ("max_effects", {"effects": {"max_effects": -5}}, "effects.max_effects"),
    ("unknown key", {"netwrok": {}}, "netwrok"),
    ("provider", {"provider": {"kind": "gpt"}}, "provider.kind"),
    ("injection", {"credentials": [{"secret": "k", "inject": "stdin"}]}, "credentials.0.inject"),
    ("service port", {"network": {"allow": [{"service": "db", "namespace": "data"}]}}, "network.allow.0"),
    (
        "service name",
        {"network": {"allow": [{"service": "DB", "namespace": "d", "port": 1}]}},
        "network.allow.0",
    ),
    (
        "service in deny",
        {"network": {"deny": [{"service": "db", "namespace": "d", "port": 1}]}},
        "network.deny.0",
    ),
]


def helm_refuses(values: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = helm("template", "rel", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0, f"helm accepted {values}"
    return done.stderr


@pytest.mark.parametrize(("case", "change", "where"), BAD_AGENTS, ids=[c for c, _, _ in BAD_AGENTS])
def test_a_bad_agent_fails_the_install_and_the_controller_alike(
    case: str, change: dict[str, Any], where: str, tmp_path: Path
) -> None:
    agent = {**GOOD_AGENT, **change}
    values = {"agents": {"a": agent}, "secrets": {"k": {"secretName": "s", "key": "k"}}}
    message = helm_refuses(values, tmp_path)
    assert f"agents.a.{where}" in message or ("agents.a: Additional property" in message and where in message)
    # The same agent in an airlock.yaml: the controller would refuse it too.
    config = tmp_path / "airlock.yaml"
    entry = {"backend": "kubernetes", **agent}
    config.write_text(yaml.safe_dump({"version": 1, "secrets": {"k": {"env": "K"}}, "agents": {"a": entry}}))
    with pytest.raises((InvalidConfigError, ConfigError)):
        load_config(config)


BAD_SETTINGS: list[tuple[str, dict[str, Any], str]] = [
    ("sandbox namespace", {"sandbox": {"namespace": {"name": "Bad_NS"}}}, "sandbox.namespace.name"),
    ("runtime class", {"sandbox": {"runtimeClasses": {"gvisor": "G V"}}}, "sandbox.runtimeClasses.gvisor"),
    ("workspace", {"sandbox": {"workspaceMedium": "Tape"}}, "sandbox.workspaceMedium"),
    ("concurrency", {"controller": {"concurrency": 0}}, "controller.concurrency"),
    ("proxy memory", {"egressProxy": {"memory": "lots"}}, "egressProxy.memory"),
    ("dns range", {"sandbox": {"dns": {"ipBlocks": ["10.96.0.0/12"]}}}, "sandbox.dns.ipBlocks.0"),
    ("dns ports", {"sandbox": {"dns": {"ports": []}}}, "sandbox.dns.ports"),
    (
        "dns selector",
        {"sandbox": {"dns": {"selectors": [{"podLabels": {"a": "b"}}]}}},
        "sandbox.dns.selectors.0",
    ),
    ("pod CIDRs are gone", {"isolationTest": {"podCIDRs": ["10.244.0.0/16"]}}, "isolationTest"),
    ("secret ref", {"secrets": {"k": {"secretName": "s"}}}, "secrets.k"),
    ("top-level typo", {"agent": {}}, "agent"),
    (
        "an agent on another backend",
        {"agents": {"a": {**GOOD_AGENT, "backend": "docker"}}},
        "agents.a.backend",
    ),
]


@pytest.mark.parametrize(("case", "values", "where"), BAD_SETTINGS, ids=[c for c, _, _ in BAD_SETTINGS])
def test_bad_settings_fail_the_install(case: str, values: dict[str, Any], where: str, tmp_path: Path) -> None:
    assert where in helm_refuses(values, tmp_path)


def test_a_credential_naming_an_undeclared_secret_fails_with_its_name(tmp_path: Path) -> None:
    agent = {**GOOD_AGENT, "credentials": [{"secret": "missing-key", "inject": "sidecar"}]}
    message = helm_refuses({"agents": {"a": agent}}, tmp_path)
    assert 'secret "missing-key" is not declared under secrets:' in message


def test_an_agent_may_share_a_probe_agents_name(tmp_path: Path) -> None:
    """The probe's agents are not in the controller's config, so no name is reserved there."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"agents": {"airlock-probe-deny": GOOD_AGENT}}))
    config = chart_config(tmp_path, values)
    assert config.agents["airlock-probe-deny"].spec.provider.kind == "anthropic"


def test_the_schema_lists_are_airlocks_own() -> None:
    agent = SCHEMA["$defs"]["agent"]["properties"]
    assert set(agent) == (set(SANDBOX_KEYS) | set(AgentSpec.model_fields)) - {"name"}
    assert agent["provider"]["properties"]["kind"]["enum"] == list(PROVIDER_KINDS)
    from airlock.sandbox import backend

    kinds = SCHEMA["$defs"]["isolationKind"]["enum"]
    assert set(kinds) == set(backend("kubernetes").isolations)


def _isolation_of(config: AirlockConfig) -> dict[str, list[str]]:
    return {name: [b.type for b in agent.environment.isolation] for name, agent in config.agents.items()}


def test_agents_that_name_no_isolation_get_the_charts_default_and_named_ones_keep_theirs(
    tmp_path: Path,
) -> None:
    values = tmp_path / "agents.yaml"
    agent = {"provider": {"kind": "scripted", "script": [{"text": "hi"}]}}
    values.write_text(
        yaml.safe_dump({"agents": {"plain": agent, "kata": {**agent, "isolation": ["micro_vm"]}}})
    )
    chosen = chart_config(tmp_path, values, sets=("sandbox.defaultIsolation=gvisor",))
    assert _isolation_of(chosen) == {"plain": ["gvisor"], "kata": ["micro_vm"]}
    # auto with no cluster to look in (helm template, GitOps): container, and the notes say so.
    auto = chart_config(tmp_path, values)
    assert _isolation_of(auto) == {"plain": ["container"], "kata": ["micro_vm"]}
    notes = render_notes(values)
    assert "Agents that name no isolation run under container (sandbox.defaultIsolation: auto:" in notes
    assert "set\nsandbox.defaultIsolation" in notes or "set sandbox.defaultIsolation" in notes
    assert "run under gvisor." in render_notes(values, sets=("sandbox.defaultIsolation=gvisor",))
    refused = helm("template", "rel", str(CHART), "--set", "sandbox.defaultIsolation=wasm", check=False)
    assert refused.returncode != 0 and "defaultIsolation" in refused.stderr


def test_user_namespaces_reach_the_backend(tmp_path: Path) -> None:
    off = chart_config(tmp_path).settings_of("kubernetes")
    on = chart_config(tmp_path, sets=("sandbox.userNamespaces=true",)).settings_of("kubernetes")
    assert isinstance(off, KubernetesSettings) and off.user_namespaces is False
    assert isinstance(on, KubernetesSettings) and on.user_namespaces is True

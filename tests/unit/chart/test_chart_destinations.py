"""No rendered rule admits the pod network: for the default values and every example, neither
the chart's own NetworkPolicies nor any agent's proxy policy (as the backend renders it from
the chart's config) holds an ipBlock inside a private or other special range. The isolation
probe's one destination is a selector peer that matches the probe pod the chart renders."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest

from airlock.config import AirlockConfig, load_config
from airlock.policy.decision import SPECIAL_RANGES, net_overlap
from airlock.sandbox import resolve_limits
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.sandbox.kubernetes._names import Owner
from airlock.sandbox.kubernetes._render import SandboxShape, render_network_policies
from tests.support.helm import CHART, objects, render

CASES = {"default": (), **{p.stem: (p,) for p in sorted((CHART / "examples").glob("*.yaml"))}}
OWNER = Owner(name="airlock-owner-test", uid="11111111-2222-3333-4444-555555555555")


def chart_objects(case: str) -> list[dict[str, Any]]:
    return objects(render(*CASES[case]))


def chart_configs(found: list[dict[str, Any]], tmp_path: Path) -> list[AirlockConfig]:
    """The controller's config and the isolation test's (when enabled)."""
    configs = []
    for config_map in (o for o in found if o["kind"] == "ConfigMap"):
        path = tmp_path / f"{config_map['metadata']['name']}.yaml"
        path.write_text(config_map["data"]["airlock.yaml"])
        configs.append(load_config(path))
    return configs


def proxy_policies(config: AirlockConfig) -> dict[str, list[dict[str, Any]]]:
    """Each agent's NetworkPolicies as the backend renders them under the chart's settings."""
    settings = config.settings_of("kubernetes")
    assert isinstance(settings, KubernetesSettings)
    out = {}
    for name, agent in config.agents.items():
        shape = SandboxShape(
            sandbox_id="sb-0123456789abcdef",
            namespace=settings.namespace,
            owner=OWNER,
            settings=settings,
            image="airlock-runner:test",
            plan=agent.plan(),
            limits=resolve_limits(agent.environment),
            runtime_class=None,
            active_deadline_s=None,
            controller_namespace="airlock",
        )
        out[name] = render_network_policies(shape)
    return out


def ip_blocks(policy: dict[str, Any]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    spec = policy["spec"]
    rules = [*spec.get("egress", []), *spec.get("ingress", [])]
    peers = [p for r in rules for p in (r.get("to", []) + r.get("from", []))]
    return [ipaddress.ip_network(p["ipBlock"]["cidr"]) for p in peers if "ipBlock" in p]


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_rendered_rule_admits_a_private_range(case: str, tmp_path: Path) -> None:
    found = chart_objects(case)
    policies = [o for o in found if o["kind"] == "NetworkPolicy"]
    for config in chart_configs(found, tmp_path):
        for agent_policies in proxy_policies(config).values():
            policies += agent_policies
    for policy in policies:
        for block in ip_blocks(policy):
            if block.prefixlen == 0:
                continue  # "every public address": the special ranges are its exceptions
            special = [str(net) for _, net in SPECIAL_RANGES if net_overlap(block, net)]
            assert not special, f"{case}: {policy['metadata']['name']} admits {block} (in {special})"


def test_the_probe_destination_selects_the_probe_pod_by_labels(tmp_path: Path) -> None:
    found = chart_objects("default")
    probe_config = [c for c in chart_configs(found, tmp_path) if "airlock-probe-allow" in c.agents]
    (config,) = probe_config
    policies = proxy_policies(config)["airlock-probe-allow"]
    egress = policies[1]["spec"]["egress"]  # the proxy pod's
    (probe_rule,) = [r for r in egress if r["ports"] == [{"protocol": "TCP", "port": 8080}]]
    (peer,) = probe_rule["to"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "airlock"}}
    (pod,) = [o for o in found if o["kind"] == "Pod" and o["metadata"]["name"].endswith("isolation-test")]
    selector = peer["podSelector"]["matchLabels"]
    assert selector and selector.items() <= pod["metadata"]["labels"].items()
    (service,) = [o for o in found if o["kind"] == "Service" and o["metadata"]["name"] == "rel-airlock-probe"]
    assert service["spec"]["selector"] == selector

"""``network.allow`` entries naming an in-cluster Service: accepted for Kubernetes agents (and
carried into the plan), refused with a clear message on backends without a cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from airlock.config import load_config
from airlock.policy import ClusterService

Write = Callable[..., Path]
One = Callable[[Path], str]

AGENT = """\
agents:
  coder:
    provider: {kind: scripted, script: []}
    backend: BACKEND
    network:
      allow:
        - RULE
"""


def agent(backend: str, rule: str) -> str:
    return AGENT.replace("BACKEND", backend).replace("RULE", rule)


def test_a_kubernetes_agent_allows_a_service_by_name(write: Write) -> None:
    path = write(
        agent(
            "kubernetes",
            "{service: search, namespace: tools, port: 80, target_port: 8080, pods: {app: Search}}",
        )
    )
    [rule] = load_config(path).agents["coder"].plan().egress.rules
    expected = ClusterService(name="search", namespace="tools", pods={"app": "Search"}, target_port=8080)
    assert (rule.kind, rule.service, rule.port, rule.action) == ("service", expected, 80, "allow")


def test_docker_refuses_a_service_destination(write: Write, one_issue: One) -> None:
    path = write(agent("docker", "{service: search, namespace: tools, port: 80}"))
    assert one_issue(path) == (
        f"{path}:7:11: agents.coder.network.allow[0]: a Service destination ({{service: search, "
        "namespace: tools}) names a Kubernetes Service; backend 'docker' has no cluster to reach it in: "
        "use backend kubernetes, or allow the host by its domain or IP"
    )


def test_a_service_rule_needs_its_namespace_and_port(write: Write, one_issue: One) -> None:
    path = write(agent("kubernetes", "{service: search, namespace: tools}"))
    assert one_issue(path).endswith(
        "agents.coder.network.allow[0]: a service rule needs its namespace and port: "
        "{service, namespace, port}"
    )


def test_a_rule_is_a_destination_or_a_service(write: Write, one_issue: One) -> None:
    path = write(
        agent("kubernetes", "{destination: example.com, service: search, namespace: tools, port: 1}")
    )
    assert one_issue(path).endswith("a rule names either a destination or a service, not both")
    path = write(agent("kubernetes", "{destination: example.com, pods: {app: x}}"))
    assert one_issue(path).endswith("pods belong to a service rule; this rule names a destination")


def test_invalid_names_and_labels_are_named(write: Write, one_issue: One) -> None:
    path = write(agent("kubernetes", "{service: Search, namespace: tools, port: 80}"))
    assert "service 'Search' is not a Service name" in one_issue(path)
    path = write(agent("kubernetes", "{service: search, namespace: tools, port: 80, pods: {'a b': x}}"))
    assert "pod label key 'a b' is not a valid label key" in one_issue(path)

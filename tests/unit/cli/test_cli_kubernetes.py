"""The CLI and the Kubernetes backend, without a cluster: ``agents show`` prints the
NetworkPolicies an agent gets, ``backends.kubernetes`` is validated with file:line,
``serve --backend`` refuses what a backend cannot enforce, ``gc --backend`` names the backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from airlock.cli import app
from airlock.sandbox import backend_names

from .clihelp import CALC_SCRIPT

WIDE = {"COLUMNS": "200"}

# Line numbers matter: the error tests below point at them.
CONFIG = """
version: 1
agents:
  on-cluster:
    provider: {kind: scripted, script: calc.yaml}
    tools: [calculator]
    backend: kubernetes
    network:
      allow:
        - {destination: example.org, port: 443}
  on-docker:
    provider: {kind: scripted, script: calc.yaml}
    tools: [calculator]
    backend: docker
backends:
  kubernetes:
    namespace: team-sandboxes
"""

SANDBOX_POLICY = "airlock-sb-0000000000000000"

#: An agent the process backend can run as configured (it asks for no isolation it lacks).
ON_HOST = """
  on-host:
    provider: {kind: scripted, script: calc.yaml}
    tools: [calculator]
    backend: process
"""


@pytest.fixture
def config(write_config: Any) -> Path:
    path: Path = write_config(CONFIG, calc__yaml=CALC_SCRIPT)
    return path


def objects_section(stdout: str) -> list[dict[str, Any]]:
    """The YAML documents ``agents show`` prints after its ``<backend> objects`` heading."""
    _, _, after = stdout.partition(" objects (as the API server receives them")
    assert after, stdout
    documents = after.split("\n", 1)[1]
    return [d for d in yaml.safe_load_all(documents) if d is not None]


def by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects}


# --- agents show ---------------------------------------------------------------------------


def test_show_prints_the_network_policies_of_a_kubernetes_agent(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["agents", "show", "on-cluster", "-c", str(config)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "kubernetes objects" in result.stdout
    assert "kind: NetworkPolicy" in result.stdout
    policies = by_name(objects_section(result.stdout))
    assert set(policies) == {"airlock-default-deny", SANDBOX_POLICY, f"{SANDBOX_POLICY}-proxy"}
    assert {p["kind"] for p in policies.values()} == {"NetworkPolicy"}
    # backends.kubernetes reached the renderer: every object is in the configured namespace
    assert {p["metadata"]["namespace"] for p in policies.values()} == {"team-sandboxes"}
    deny_all = policies["airlock-default-deny"]["spec"]
    assert deny_all == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    # the sandbox may reach only its proxy pod; the proxy may reach port 443 (the name rule)
    (to_proxy,) = policies[SANDBOX_POLICY]["spec"]["egress"]
    assert to_proxy["to"] == [
        {
            "podSelector": {
                "matchLabels": {"airlock.dev/sandbox": "sb-0000000000000000", "airlock.dev/role": "proxy"}
            }
        }
    ]
    dns, public = policies[f"{SANDBOX_POLICY}-proxy"]["spec"]["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}  # the name must resolve: cluster DNS only
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert public["ports"] == [{"protocol": "TCP", "port": 443}]
    ipv4 = public["to"][0]["ipBlock"]
    assert ipv4["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "169.254.0.0/16"} <= set(ipv4["except"])  # never private or metadata for a name


def test_show_json_lists_the_same_backend_objects(runner: CliRunner, config: Path) -> None:
    text = runner.invoke(app, ["agents", "show", "on-cluster", "-c", str(config)], env=WIDE)
    result = runner.invoke(app, ["agents", "show", "on-cluster", "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backend"] == "kubernetes"
    assert [o["kind"] for o in data["backend_objects"]] == ["NetworkPolicy"] * 3
    assert data["backend_objects"] == objects_section(text.stdout)


def test_a_docker_agent_shows_no_backend_objects(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["agents", "show", "on-docker", "-c", str(config)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "objects (as the API server receives them" not in result.stdout
    assert "NetworkPolicy" not in result.stdout
    result = runner.invoke(app, ["agents", "show", "on-docker", "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backend"] == "docker" and data["backend_objects"] == []


# --- backends.kubernetes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "needles"),
    [
        ("    namespac: team-sandboxes\n", ("backends.kubernetes.namespac", "unknown key 'namespac'")),
        (
            "    namespace: Team_Sandboxes\n",
            ("backends.kubernetes.namespace", "'Team_Sandboxes' is not a valid namespace name"),
        ),
        ("    connect: telepathy\n", ("backends.kubernetes.connect", "'port_forward'")),
    ],
    ids=["unknown-key", "bad-namespace", "bad-connect"],
)
@pytest.mark.parametrize(
    "args",
    [["agents", "ls"], ["agents", "show", "on-cluster"], ["gc", "--backend", "kubernetes"]],
    ids=["agents-ls", "agents-show", "gc"],
)
def test_a_bad_kubernetes_section_exits_2_with_file_and_line(
    runner: CliRunner, write_config: Any, args: list[str], section: str, needles: tuple[str, ...]
) -> None:
    text = CONFIG.replace("    namespace: team-sandboxes\n", section)
    path: Path = write_config(text, calc__yaml=CALC_SCRIPT)
    assert path.read_text().splitlines()[15] == section.rstrip("\n")  # line 16, column 5: the key
    result = runner.invoke(app, [*args, "--config", str(path)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "invalid configuration" in result.stderr
    assert f"{path}:16:5: " in result.stderr
    for needle in needles:
        assert needle in result.stderr
    assert "removed" not in result.stdout  # gc swept nothing


# --- serve --backend -----------------------------------------------------------------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What ``airlock serve`` would have served (the server itself never starts)."""
    seen: list[Any] = []

    def capture(loaded: Any, options: Any) -> None:
        seen.append(loaded)

    monkeypatch.setattr("airlock.cli._serve.serve", capture)
    return seen


def test_serve_on_a_backend_that_cannot_enforce_network_rules_exits_2(
    runner: CliRunner, write_config: Any, served: list[Any]
) -> None:
    text = CONFIG.replace("backends:", ON_HOST.lstrip("\n") + "backends:")
    path: Path = write_config(text, calc__yaml=CALC_SCRIPT)
    result = runner.invoke(app, ["serve", "-c", str(path), "--backend", "process"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "cannot run every agent on backend 'process'" in result.stderr
    assert "agent 'on-cluster': process cannot enforce its network policy" in result.stderr
    assert "'on-host'" not in result.stderr  # it asks nothing the process backend lacks
    assert served == []


def test_serve_backend_moves_every_agent_onto_it(runner: CliRunner, config: Path, served: list[Any]) -> None:
    result = runner.invoke(app, ["serve", "-c", str(config), "--backend", "kubernetes"], env=WIDE)
    assert result.exit_code == 0, result.output
    (loaded,) = served
    assert {name: agent.backend for name, agent in loaded.agents.items()} == {
        "on-cluster": "kubernetes",
        "on-docker": "kubernetes",
    }
    assert loaded.settings_of("kubernetes").namespace == "team-sandboxes"


def test_serve_with_an_unknown_backend_exits_2_naming_the_known_ones(
    runner: CliRunner, config: Path, served: list[Any]
) -> None:
    result = runner.invoke(app, ["serve", "-c", str(config), "--backend", "nomad"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert f"unknown backend 'nomad'; valid backends: {', '.join(backend_names())}" in result.stderr
    assert served == []


# --- gc --backend --------------------------------------------------------------------------


def test_gc_with_an_unknown_backend_names_the_known_ones(runner: CliRunner) -> None:
    result = runner.invoke(app, ["gc", "--backend", "nomad"], env=WIDE)
    assert result.exit_code == 3, result.output
    assert f"unknown sandbox backend 'nomad'; backends: {', '.join(backend_names())}" in result.stderr
    assert set(backend_names()) >= {"docker", "kubernetes", "process"}
    assert "removed" not in result.stdout and "nothing to remove" not in result.stdout

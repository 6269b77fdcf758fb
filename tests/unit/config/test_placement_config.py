"""An agent's ``placement`` (node_selector, tolerations, runtime_class): accepted on Kubernetes
and carried to the agent, refused on backends that cannot place sandboxes; ``runtime_class``
refused with a stronger isolation than ``container`` (never a downgrade)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.errors import ConfigError
from airlock.sandbox import Placement, Toleration
from airlock.sandbox.kubernetes import KubernetesSettings

Write = Callable[..., Path]
One = Callable[[Path], str]

GPU_AGENT = """\
agents:
  trainer:
    provider: {kind: scripted, script: []}
    backend: BACKEND
    isolation: [ISOLATION]
    placement:
      node_selector: {airlock.dev/pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      runtime_class: nvidia
"""


def gpu_agent(backend: str = "kubernetes", isolation: str = "container") -> str:
    return GPU_AGENT.replace("BACKEND", backend).replace("ISOLATION", isolation)


def test_a_kubernetes_agent_takes_its_placement(write: Write) -> None:
    config = load_config(write(gpu_agent()))
    assert config.agents["trainer"].placement == Placement(
        node_selector={"airlock.dev/pool": "gpu"},
        tolerations=(Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
        runtime_class="nvidia",
    )
    # the backend may read the RuntimeClass by name (its access table, the chart's Role)
    settings = config.settings_of("kubernetes")
    assert isinstance(settings, KubernetesSettings)
    assert settings.placement_runtime_classes == ("nvidia",)


def test_the_agents_runtime_classes_join_the_configured_settings(write: Write) -> None:
    text = gpu_agent() + "backends:\n  kubernetes:\n    namespace: gpu-sandboxes\n"
    settings = load_config(write(text)).settings_of("kubernetes")
    assert isinstance(settings, KubernetesSettings)
    assert (settings.namespace, settings.placement_runtime_classes) == ("gpu-sandboxes", ("nvidia",))


def test_an_agent_without_placement_is_placed_nowhere_in_particular(write: Write) -> None:
    text = "agents:\n  coder:\n    provider: {kind: scripted, script: []}\n    backend: kubernetes\n"
    config = load_config(write(text))
    assert config.agents["coder"].placement.empty
    assert config.settings_of("kubernetes") is None


@pytest.mark.parametrize("backend", ["docker", "process"])
def test_a_backend_that_cannot_place_sandboxes_refuses_the_agent(
    write: Write, one_issue: One, backend: str
) -> None:
    text = gpu_agent(backend).replace("    isolation: [container]\n", "")
    path = write(text)
    assert one_issue(path) == (
        f"{path}:5:5: agents.trainer.placement: backend {backend!r} cannot place its sandboxes "
        "(node_selector, tolerations, runtime_class); placement is honoured by backend kubernetes"
    )


@pytest.mark.parametrize("isolation", ["gvisor", "micro_vm"])
def test_a_runtime_class_never_replaces_a_stronger_isolation(
    write: Write, one_issue: One, isolation: str
) -> None:
    path = write(gpu_agent(isolation=isolation))
    message = one_issue(path)
    assert message.startswith(f"{path}:9:7: agents.trainer.placement.runtime_class: runtime_class goes only ")
    assert (
        f"a {isolation} sandbox runs under the RuntimeClass backends.kubernetes.runtime_classes." in message
    )
    assert "never downgraded" in message


def test_a_stronger_isolation_may_still_choose_its_nodes(write: Write) -> None:
    path = write(gpu_agent(isolation="gvisor").replace("      runtime_class: nvidia\n", ""))
    placement = load_config(path).agents["trainer"].placement
    assert placement.runtime_class is None and placement.node_selector == {"airlock.dev/pool": "gpu"}


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("      node_selector: {'bad key!': gpu}\n", "is not a label key"),
        ("      node_selector: {pool: 'no spaces'}\n", "is not a label value"),
        ("      runtime_class: NVIDIA\n", "is not a RuntimeClass name"),
        ("      tolerations: [{key: a, operator: Sometimes}]\n", "'Equal' or 'Exists'"),
        ("      affinity: {}\n", "unknown key 'affinity'"),
    ],
)
def test_a_bad_placement_is_a_clear_error(write: Write, one_issue: One, line: str, needle: str) -> None:
    text = "agents:\n  trainer:\n    provider: {kind: scripted, script: []}\n    backend: kubernetes\n"
    path = write(text + "    placement:\n" + line)
    assert needle in one_issue(path)


def test_serve_on_a_backend_that_cannot_place_refuses_the_placed_agent(write: Write) -> None:
    config = load_config(write(gpu_agent()))
    with pytest.raises(ConfigError, match="agent 'trainer': docker cannot place its sandboxes"):
        config.on_backend("docker")

"""The example configuration's agents validate for both backends, and what each would get on
Kubernetes passes the official schemas."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from airlock.config import load_config
from airlock.sandbox import backend

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "airlock.yaml"


def test_every_example_agent_runs_on_either_backend() -> None:
    config = load_config(EXAMPLES)
    assert {a.backend for a in config.agents.values()} == {"docker"}
    on_kubernetes = config.on_backend("kubernetes")
    assert set(on_kubernetes.agents) == set(config.agents)
    for name, agent in on_kubernetes.agents.items():
        assert agent.backend == "kubernetes"
        assert agent.environment == config.agents[name].environment  # the same policy, unchanged
        assert agent.plan() == config.agents[name].plan()


@pytest.mark.parametrize("version", ["1.25", "1.37"])
def test_every_example_agents_network_policies_pass_the_official_schemas(version: str) -> None:
    config = load_config(EXAMPLES).on_backend("kubernetes")
    render = backend("kubernetes").policy_objects
    assert render is not None
    for agent in config.agents.values():
        objects = render(agent.plan(), config.settings_of("kubernetes"))
        assert {o["kind"] for o in objects} == {"NetworkPolicy"} and len(objects) >= 2
        for obj in objects:
            kubernetes_validate.validate(obj, version, strict=True)


def test_a_backend_that_cannot_isolate_an_agent_is_refused() -> None:
    from airlock.errors import ConfigError

    config = load_config(EXAMPLES)
    with pytest.raises(ConfigError) as info:
        config.on_backend("process")
    assert "cannot run every agent on backend 'process'" in str(info.value)
    assert "isolation container is not provided by process" in str(info.value)
    with pytest.raises(ConfigError, match="unknown backend 'nomad'"):
        config.on_backend("nomad")

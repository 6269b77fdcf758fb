"""``RunningAgent.with_local_model``: the server's key as a sidecar credential (no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.config import AgentConfig, AirlockConfig, load_config
from airlock.errors import ConfigError
from airlock.policy.plan import SidecarRoute
from airlock.sandbox import sidecar_agent
from airlock.sandbox.docker._egress import proxy_urls
from layer0 import CredentialInjection, CredentialRef

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
URL = "http://172.21.0.1:8765/v1"


@pytest.fixture(scope="module")
def config() -> AirlockConfig:
    return load_config(EXAMPLES / "airlock.yaml")


@pytest.fixture
def demo(config: AirlockConfig) -> AgentConfig:
    return config.agent("demo")


def test_without_a_credential_nothing_is_injected(demo: AgentConfig) -> None:
    resolved = demo.running().with_local_model(URL)
    assert resolved.environment.credentials == []
    assert resolved.sidecar_routes == {}


def test_the_key_becomes_a_sidecar_credential_routed_to_the_server(demo: AgentConfig) -> None:
    resolved = demo.running().with_local_model(URL, credential="local-model-key")
    assert resolved.spec.provider.base_url == URL
    assert resolved.environment.credentials == [
        CredentialRef(name="local-model-key", injection=CredentialInjection.sidecar())
    ]
    assert resolved.sidecar_routes == {
        "local-model-key": SidecarRoute(
            upstream="http://172.21.0.1:8765", header="authorization", value_prefix="Bearer "
        )
    }
    plan = resolved.plan()  # the /32 rule with the port allows the route's upstream
    assert [(c.name, c.kind) for c in plan.sidecars] == [("local-model-key", "sidecar")]
    assert [r.kind for r in plan.egress.rules] == ["cidr"]
    # The original agent is unchanged.
    assert demo.environment.credentials == [] and demo.sidecar_routes == {}


def test_the_provider_is_pointed_at_the_credential_proxy(demo: AgentConfig) -> None:
    resolved = demo.running().with_local_model(URL, credential="local-model-key")
    agent = sidecar_agent(resolved.spec, resolved.plan(), proxy_urls({"local-model-key": 9100}))
    assert agent.provider.base_url is not None
    assert agent.provider.base_url.endswith(":9100/v1")
    assert "172.21.0.1" not in agent.provider.base_url
    assert agent.provider.api_key_env is None


def test_header_and_prefix_can_be_chosen(demo: AgentConfig) -> None:
    resolved = demo.running().with_local_model(
        "http://[fd00::1]:9000/v1", credential="k", header="X-Api-Key", value_prefix=""
    )
    assert resolved.sidecar_routes["k"] == SidecarRoute(upstream="http://[fd00::1]:9000", header="x-api-key")
    assert resolved.plan().sidecars[0].route == resolved.sidecar_routes["k"]


def test_a_url_without_a_port_keeps_its_default_port(demo: AgentConfig) -> None:
    resolved = demo.running().with_local_model("http://10.0.0.5/v1", credential="local-model-key")
    assert resolved.sidecar_routes["local-model-key"].upstream == "http://10.0.0.5"
    plan = resolved.plan()  # the route's port (80) is allowed by the rewritten rule
    assert plan.sidecars[0].name == "local-model-key"
    agent = sidecar_agent(resolved.spec, plan, proxy_urls({"local-model-key": 9100}))
    assert agent.provider.base_url is not None and agent.provider.base_url.endswith(":9100/v1")


def test_a_credential_name_the_agent_already_uses_is_refused(config: AirlockConfig) -> None:
    coder = config.agent("coder")  # has a sidecar credential named anthropic-api-key
    with pytest.raises(ConfigError, match="reserved for the local model"):
        coder.running().with_local_model(URL, credential="anthropic-api-key")

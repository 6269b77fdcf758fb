"""RunningAgent: the agent as it will run, built in one place with each rewrite a named step."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.policy import SidecarRoute
from airlock.sandbox import LOCAL_MODEL, RunningAgent, SandboxRequest
from airlock.spec import AgentSpec, ProviderSpec
from layer0 import EnvironmentSpec, NetworkPolicy, NetworkRule, TurnInput

ROOT = Path(__file__).resolve().parents[3]


def local_agent() -> RunningAgent:
    spec = AgentSpec(name="a", provider=ProviderSpec(kind="openai_compat", model="m", base_url=LOCAL_MODEL))
    network = NetworkPolicy(default="deny", rules=[NetworkRule(destination=LOCAL_MODEL, action="allow")])
    return RunningAgent.of(spec, EnvironmentSpec(network=network))


def test_each_step_is_named_and_the_final_spec_is_the_last_steps() -> None:
    running = local_agent()
    assert running.steps == () and running.uses_local_model
    built = running.with_inline_script().with_local_model("http://10.0.0.5:8765/v1", credential="local-key")
    assert built.steps == ("inline_script", "local_model")
    assert not built.uses_local_model
    plan = built.plan()
    final = built.with_sidecar_routes(plan, {"local-key": "http://proxy:9100"})
    assert final.steps == ("inline_script", "local_model", "sidecar_routes")
    assert final.final().provider.base_url == "http://proxy:9100/v1"
    assert running.spec.provider.base_url == LOCAL_MODEL  # every step returns a new value


def test_the_script_step_inlines_a_script_file() -> None:
    script = ROOT / "examples" / "scripts" / "calculator.yaml"
    spec = AgentSpec(name="a", provider=ProviderSpec(kind="scripted", script=str(script)))
    inlined = RunningAgent.of(spec, EnvironmentSpec()).with_inline_script().final()
    assert not isinstance(inlined.provider.script, str)


def test_a_request_carries_the_running_agent_and_its_plan() -> None:
    route = SidecarRoute(upstream="https://api.example.com", header="x-key")
    spec = AgentSpec(name="a", provider=ProviderSpec(kind="openai_compat", model="m"))
    running = RunningAgent.of(spec, EnvironmentSpec(), {"k": route})
    request = SandboxRequest.of(running, TurnInput.new("hi"))
    assert request.agent is running
    assert request.environment is running.environment
    assert (
        request.plan
        == SandboxRequest.compile(
            spec, TurnInput.new("hi"), EnvironmentSpec(), sidecar_routes={"k": route}
        ).plan
    )


def test_the_rewrites_live_in_the_builder_only() -> None:
    """No other module rewrites the agent's provider URL or script (the three old rooms)."""
    for path in (ROOT / "airlock").rglob("*.py"):
        if path.name == "_running.py":
            continue
        text = path.read_text(encoding="utf-8")
        for old in ("def inline_script(", "def sidecar_agent(", "def with_local_model("):
            assert old not in text, f"{path.relative_to(ROOT)} defines {old.rstrip('(')}"


def test_a_bad_local_model_url_is_refused() -> None:
    from airlock.errors import ConfigError

    with pytest.raises(ConfigError, match="http"):
        local_agent().with_local_model("model-host:9000")

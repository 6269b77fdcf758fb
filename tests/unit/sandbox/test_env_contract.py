"""DockerEnvironment/LocalProcessEnvironment refusals that need no engine, and import hygiene."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airlock.sandbox._turn import agent_spec_of, hard_timeout_s
from airlock.sandbox.docker import DockerEnvironment
from airlock.sandbox.process import LocalProcessEnvironment
from airlock.testing import scripted_agent
from layer0 import (
    ContainerIsolation,
    EnvError,
    EnvironmentSpec,
    ResourceLimits,
    TurnConfig,
    TurnInput,
    TurnOutput,
)

SPEC = scripted_agent([], name="a")


class PlainTurn:
    async def execute(self, input: TurnInput) -> TurnOutput:
        return TurnOutput.new("hi")


class SpecTurn(PlainTurn):
    spec = SPEC


async def test_turn_without_agent_spec_is_refused() -> None:
    for env in (DockerEnvironment(client=object()), LocalProcessEnvironment()):
        with pytest.raises(EnvError) as e:
            await env.run(PlainTurn(), TurnInput.new("x"), EnvironmentSpec())
        assert e.value.kind == "other" and "AgentSpec" in str(e.value) and "PlainTurn" in str(e.value)
    assert agent_spec_of(SpecTurn()) is SPEC


async def test_process_environment_refuses_what_it_cannot_enforce() -> None:
    env = LocalProcessEnvironment()
    with pytest.raises(EnvError) as e:
        await env.run(SpecTurn(), TurnInput.new("x"), EnvironmentSpec(isolation=[ContainerIsolation()]))
    assert e.value.kind == "isolation_violation" and "DockerEnvironment" in str(e.value)
    with pytest.raises(EnvError) as e:
        await env.run(SpecTurn(), TurnInput.new("x"), EnvironmentSpec(resources=ResourceLimits(memory="1Gi")))
    assert e.value.kind == "resource_exceeded"


def test_hard_timeout() -> None:
    plain = TurnInput.new("x")
    assert hard_timeout_s(SPEC, plain, None, 5) is None
    assert hard_timeout_s(SPEC, plain, 30, 5) == 30
    limited = TurnInput.new("x", config=TurnConfig(max_duration=2000))
    assert hard_timeout_s(SPEC, limited, None, 5) == 7
    assert hard_timeout_s(SPEC, limited, 3, 5) == 3
    with_defaults = SPEC.model_copy(update={"defaults": TurnConfig(max_duration=10_000)})
    assert hard_timeout_s(with_defaults, plain, None, 1) == 11


def test_importing_the_backends_does_not_import_docker_or_cli_libraries() -> None:
    code = (
        "import sys, airlock.controller, airlock.sandbox.docker, airlock.sandbox.process; "
        "bad = [m for m in ('docker', 'typer', 'rich', 'anthropic', 'openai') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr

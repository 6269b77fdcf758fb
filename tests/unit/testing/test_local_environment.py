"""LocalEnvironment: passthrough, error mapping, refusal of what it cannot provide."""

from __future__ import annotations

import pytest

from airlock.testing import EchoTurn
from airlock.testing._local_environment import LocalEnvironment
from layer0 import (
    ContainerIsolation,
    CredentialInjection,
    CredentialRef,
    EnvError,
    Environment,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    ResourceLimits,
    TurnError,
    TurnInput,
    TurnOutput,
)


class Failing:
    async def execute(self, input: TurnInput) -> TurnOutput:
        raise TurnError.retryable("rate limited")


class Crashing:
    async def execute(self, input: TurnInput) -> TurnOutput:
        raise KeyError("k")


async def test_passthrough_calls_execute() -> None:
    env = LocalEnvironment()
    assert isinstance(env, Environment)
    out = await env.run(EchoTurn(), TurnInput.new("hi"), EnvironmentSpec())
    assert out.message.as_text() == "hi"
    assert out.exit_reason.kind == "complete"


async def test_turn_error_becomes_env_error() -> None:
    with pytest.raises(EnvError) as info:
        await LocalEnvironment().run(Failing(), TurnInput.new("x"), EnvironmentSpec())
    assert info.value.kind == "turn_error"
    assert isinstance(info.value.__cause__, TurnError) and info.value.__cause__.is_retryable


async def test_foreign_exception_becomes_env_error() -> None:
    with pytest.raises(EnvError) as info:
        await LocalEnvironment().run(Crashing(), TurnInput.new("x"), EnvironmentSpec())
    assert info.value.kind == "other" and isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        (EnvironmentSpec(isolation=[ContainerIsolation(image="x")]), "isolation_violation"),
        (EnvironmentSpec(network=NetworkPolicy(default=NetworkAction.DENY, rules=[])), "isolation_violation"),
        (
            EnvironmentSpec(credentials=[CredentialRef(name="k", injection=CredentialInjection.sidecar())]),
            "credential_failed",
        ),
        (EnvironmentSpec(resources=ResourceLimits(memory="1Gi")), "resource_exceeded"),
    ],
)
async def test_refuses_what_it_cannot_provide(spec: EnvironmentSpec, kind: str) -> None:
    ran: list[TurnInput] = []

    class Spy:
        async def execute(self, input: TurnInput) -> TurnOutput:
            ran.append(input)
            return TurnOutput.new("x")

    with pytest.raises(EnvError) as info:
        await LocalEnvironment().run(Spy(), TurnInput.new("x"), spec)
    assert info.value.kind == kind
    assert ran == []


async def test_empty_resource_limits_are_fine() -> None:
    out = await LocalEnvironment().run(
        EchoTurn(), TurnInput.new("x"), EnvironmentSpec(resources=ResourceLimits())
    )
    assert out.message.as_text() == "x"

"""Phase 2/4 composition: orchestrator → two echo agents → effects → store, hooks logging each step.

Everything after construction goes through the layer0 protocol types only
(``Orchestrator``, ``StateStore``/``StateReader``, ``Turn``, ``Hook``, ``Environment``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.controller.effects import EffectExecutor
from airlock.state import FsStore, InMemoryStore, SqliteStore
from airlock.testing import EchoTurn
from airlock.testing._local_environment import LocalEnvironment
from airlock.testing._orchestrator import LocalOrchestrator
from airlock.turn._logging_hook import LoggingHook
from layer0 import (
    AgentId,
    Environment,
    EnvironmentSpec,
    Hook,
    HookContext,
    HookPoint,
    Orchestrator,
    Scope,
    StateReader,
    StateStore,
    Turn,
    TurnInput,
    TurnOutput,
    WorkflowId,
    read_only,
)

WF = WorkflowId("wf-compose")


@pytest.fixture(params=["memory", "sqlite", "fs"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    if request.param == "sqlite":
        async with SqliteStore(tmp_path / "state.db") as sqlite:
            yield sqlite
    elif request.param == "fs":
        yield FsStore(tmp_path / "fs")
    else:
        yield InMemoryStore()


def build(hook: Hook, environment: Environment) -> LocalOrchestrator:
    orch = LocalOrchestrator()
    for name in ("alpha", "beta"):
        turn: Turn = EchoTurn(scope=Scope.agent(WF, name), key="reply", hooks=[hook])
        orch.register(name, turn, environment=environment, spec=EnvironmentSpec())
    return orch


async def run(orchestrator: Orchestrator, store: StateStore, inputs: dict[str, str]) -> list[TurnOutput]:
    executor = EffectExecutor(store, orchestrator)
    tasks = [(AgentId(agent), TurnInput.new(text)) for agent, text in inputs.items()]
    results = await orchestrator.dispatch_many(tasks)
    outputs = [r for r in results if isinstance(r, TurnOutput)]
    assert len(outputs) == len(tasks), results
    for (agent, _), out in zip(tasks, outputs, strict=True):
        report = await executor.apply(out, source=agent)
        assert report.ok, report
    return outputs


async def check(reader: StateReader) -> None:
    assert await reader.read(Scope.agent(WF, "alpha"), "reply") == "hello from alpha"
    assert await reader.read(Scope.agent(WF, "beta"), "reply") == "hello from beta"
    assert await reader.list(Scope.agent(WF, "alpha"), "") == ["reply"]
    hits = await reader.search(Scope.agent(WF, "beta"), "BETA", 5)
    assert [h.key for h in hits] == ["reply"]


async def test_two_echo_agents_write_through_effects_and_hooks_log(
    store: StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airlock.turn.hooks")
    orchestrator = build(LoggingHook(), LocalEnvironment())
    outputs = await run(orchestrator, store, {"alpha": "hello from alpha", "beta": "hello from beta"})

    assert [o.message.as_text() for o in outputs] == ["hello from alpha", "hello from beta"]
    await check(read_only(store))

    contexts: list[HookContext] = [
        r.hook_context  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "airlock.turn.hooks"
    ]
    steps = [HookPoint.PRE_INFERENCE, HookPoint.POST_INFERENCE, HookPoint.EXIT_CHECK]
    assert len(contexts) == 2 * len(steps)
    assert sorted(c.point for c in contexts) == sorted(steps * 2)
    outputs_seen = sorted(
        c.model_output.as_text() or ""
        for c in contexts
        if c.point == HookPoint.POST_INFERENCE and c.model_output is not None
    )
    assert outputs_seen == ["hello from alpha", "hello from beta"]

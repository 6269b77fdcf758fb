"""LocalOrchestrator: dispatch, dispatch_many order and partial failure, signals, queries."""

from __future__ import annotations

import asyncio

import pytest

from airlock.errors import ConfigError
from airlock.testing import EchoTurn
from airlock.testing._local_environment import LocalEnvironment
from airlock.testing._orchestrator import LocalOrchestrator
from layer0 import (
    AgentId,
    EnvironmentSpec,
    OrchError,
    Orchestrator,
    ProcessIsolation,
    QueryPayload,
    SignalPayload,
    TurnError,
    TurnInput,
    TurnOutput,
    WorkflowId,
)


class SlowEcho:
    """Echoes after a delay given in the input metadata, to scramble completion order."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0

    async def execute(self, input: TurnInput) -> TurnOutput:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            assert isinstance(input.metadata, dict)
            delay = input.metadata["delay"]
            assert isinstance(delay, float)
            await asyncio.sleep(delay)
            return TurnOutput.new(input.message)
        finally:
            self.running -= 1


class Failing:
    async def execute(self, input: TurnInput) -> TurnOutput:
        raise TurnError.model(f"refused {input.message.as_text()}")


class Crashing:
    async def execute(self, input: TurnInput) -> TurnOutput:
        raise RuntimeError("boom")


def orch() -> LocalOrchestrator:
    o = LocalOrchestrator()
    o.register("echo", EchoTurn())
    o.register(AgentId("slow"), SlowEcho())
    o.register("fail", Failing())
    o.register("crash", Crashing())
    return o


async def test_is_an_orchestrator() -> None:
    assert isinstance(orch(), Orchestrator)


async def test_dispatch_to_echo() -> None:
    out = await orch().dispatch(AgentId("echo"), TurnInput.new("hello"))
    assert out.message.as_text() == "hello"
    assert out.metadata.turns_used == 1


async def test_unknown_agent_lists_registered_agents() -> None:
    with pytest.raises(OrchError) as info:
        await orch().dispatch(AgentId("ghost"), TurnInput.new("x"))
    assert info.value.kind == "agent_not_found"
    assert str(info.value) == "agent not found: ghost (registered agents: crash, echo, fail, slow)"


async def test_unknown_agent_with_nothing_registered() -> None:
    with pytest.raises(OrchError, match=r"registered agents: none"):
        await LocalOrchestrator().dispatch(AgentId("x"), TurnInput.new("x"))


async def test_turn_error_is_mapped_and_chained() -> None:
    with pytest.raises(OrchError) as info:
        await orch().dispatch(AgentId("fail"), TurnInput.new("this"))
    assert info.value.kind == "turn_error"
    assert "model error: refused this" in str(info.value)
    assert isinstance(info.value.__cause__, TurnError)


async def test_foreign_exception_is_mapped_to_dispatch_failed() -> None:
    with pytest.raises(OrchError) as info:
        await orch().dispatch(AgentId("crash"), TurnInput.new("x"))
    assert info.value.kind == "dispatch_failed"
    assert "RuntimeError: boom" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_dispatch_many_keeps_input_order_and_runs_concurrently() -> None:
    o = LocalOrchestrator()
    slow = SlowEcho()
    o.register("slow", slow)
    delays = [0.2, 0.05, 0.15, 0.0, 0.1]
    tasks = [(AgentId("slow"), TurnInput.new(f"m{i}", metadata={"delay": d})) for i, d in enumerate(delays)]
    results = await o.dispatch_many(tasks)
    assert [r.message.as_text() for r in results if isinstance(r, TurnOutput)] == [f"m{i}" for i in range(5)]
    assert slow.peak == 5


async def test_dispatch_many_respects_max_concurrency() -> None:
    o = LocalOrchestrator(max_concurrency=2)
    slow = SlowEcho()
    o.register("slow", slow)
    tasks = [(AgentId("slow"), TurnInput.new(str(i), metadata={"delay": 0.01})) for i in range(6)]
    results = await o.dispatch_many(tasks)
    assert len(results) == 6 and slow.peak == 2


async def test_dispatch_many_failures_are_independent() -> None:
    tasks = [
        (AgentId("echo"), TurnInput.new("a")),
        (AgentId("fail"), TurnInput.new("b")),
        (AgentId("ghost"), TurnInput.new("c")),
        (AgentId("crash"), TurnInput.new("d")),
        (AgentId("echo"), TurnInput.new("e")),
    ]
    results = await orch().dispatch_many(tasks)
    assert isinstance(results[0], TurnOutput) and results[0].message.as_text() == "a"
    assert isinstance(results[4], TurnOutput) and results[4].message.as_text() == "e"
    kinds = [r.kind for r in results[1:4] if isinstance(r, OrchError)]
    assert kinds == ["turn_error", "agent_not_found", "dispatch_failed"]


async def test_dispatch_many_empty() -> None:
    assert await orch().dispatch_many([]) == []


async def test_64_concurrent_signals_all_counted() -> None:
    o = orch()
    wf, other = WorkflowId("wf-1"), WorkflowId("wf-2")
    await asyncio.gather(
        *(
            o.signal(wf, SignalPayload(signal_type="tick" if i % 4 else "tock", data={"i": i}))
            for i in range(64)
        ),
        *(o.signal(other, SignalPayload(signal_type="x", data=None)) for _ in range(3)),
    )
    status = await o.query(wf, QueryPayload(query_type="status", params=None))
    assert status["signal_count"] == 64
    assert status["signals_by_type"] == {"tick": 48, "tock": 16}
    assert sorted(s["data"]["i"] for s in status["recent_signals"]) == list(range(64))
    assert await o.query(other, QueryPayload(query_type="signal_count", params=None)) == 3
    assert await o.query(wf, QueryPayload(query_type="signal_count", params={"signal_type": "tock"})) == 16


async def test_recent_signals_are_bounded_and_ordered() -> None:
    o = LocalOrchestrator(keep_signals=3)
    wf = WorkflowId("w")
    for i in range(5):
        await o.signal(wf, SignalPayload(signal_type="s", data=i))
    signals = await o.query(wf, QueryPayload(query_type="signals", params=None))
    assert [s["data"] for s in signals] == [2, 3, 4]
    assert await o.query(wf, QueryPayload(query_type="signal_count", params={})) == 5


async def test_query_unknown_workflow_and_unknown_query_type() -> None:
    o = orch()
    with pytest.raises(OrchError) as info:
        await o.query(WorkflowId("never"), QueryPayload(query_type="status", params=None))
    assert info.value.kind == "workflow_not_found"
    await o.signal(WorkflowId("w"), SignalPayload(signal_type="s", data=None))
    with pytest.raises(OrchError, match=r"unknown query_type 'bogus'.*status"):
        await o.query(WorkflowId("w"), QueryPayload(query_type="bogus", params=None))


async def test_registration_rules() -> None:
    o = orch()
    with pytest.raises(ConfigError, match="already registered"):
        o.register("echo", EchoTurn())
    o.register("echo", Failing(), replace=True)
    with pytest.raises(OrchError):
        await o.dispatch(AgentId("echo"), TurnInput.new("x"))
    with pytest.raises(ConfigError, match="needs an environment"):
        o.register("x", EchoTurn(), spec=EnvironmentSpec())
    o.unregister("echo")
    assert [str(a) for a in o.agents] == ["crash", "fail", "slow"]
    with pytest.raises(ConfigError):
        LocalOrchestrator(max_concurrency=0)


async def test_agent_in_an_environment() -> None:
    o = LocalOrchestrator()
    o.register("env-echo", EchoTurn(), environment=LocalEnvironment())
    o.register("env-fail", Failing(), environment=LocalEnvironment())
    o.register(
        "isolated",
        EchoTurn(),
        environment=LocalEnvironment(),
        spec=EnvironmentSpec(isolation=[ProcessIsolation()]),
    )
    out = await o.dispatch(AgentId("env-echo"), TurnInput.new("inside"))
    assert out.message.as_text() == "inside"
    results = await o.dispatch_many(
        [(AgentId("env-fail"), TurnInput.new("x")), (AgentId("isolated"), TurnInput.new("y"))]
    )
    assert [r.kind for r in results if isinstance(r, OrchError)] == ["dispatch_failed", "dispatch_failed"]
    assert "turn error: model error: refused x" in str(results[0])
    assert "isolation violation" in str(results[1])

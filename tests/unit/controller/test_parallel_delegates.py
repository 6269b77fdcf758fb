"""A turn's consecutive delegates run concurrently (layer0's ``dispatch_many`` means parallel),
and what the parent hears stays in the order it asked: outcomes, ledger, listeners."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airlock.controller.effects import EffectExecutor, effect_address
from airlock.jobs import EffectOutcome
from airlock.state import InMemoryStore
from layer0 import (
    AgentId,
    Content,
    Delegate,
    Effect,
    OrchError,
    QueryPayload,
    Scope,
    SignalPayload,
    TurnInput,
    TurnOutput,
    WorkflowId,
    WriteMemory,
)

pytestmark = pytest.mark.timeout(90)


def output(*effects: Effect) -> TurnOutput:
    return TurnOutput.new("done").model_copy(update={"effects": list(effects)})


def delegate(agent: str, message: str = "go") -> Delegate:
    return Delegate(agent=AgentId(agent), input=TurnInput.new(message))


class Gathering:
    """An orchestrator whose children each wait until ``expected`` of them are running at once
    (a sequential executor never gets there: the test times out), then finish in reverse order
    of their start."""

    def __init__(self, expected: int, effects: dict[str, list[Effect]] | None = None) -> None:
        self.expected = expected
        self.running = 0
        self.most = 0
        self.all_in = asyncio.Event()
        self.started: list[tuple[str, str | None]] = []
        self.finished: list[str] = []
        self.effects = effects or {}

    async def dispatch(self, agent: AgentId, input: TurnInput) -> TurnOutput:
        self.started.append((str(agent), effect_address()))
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= self.expected:
            self.all_in.set()
        position = len(self.started)
        await asyncio.wait_for(self.all_in.wait(), timeout=20)
        await asyncio.sleep(0.01 * (self.expected - position))  # the last started finishes first
        self.running -= 1
        self.finished.append(str(agent))
        if str(agent) == "broken":
            raise OrchError.dispatch_failed("the child failed")
        return output(*self.effects.get(str(agent), [])).model_copy(update={"message": Content(str(agent))})

    async def dispatch_many(self, tasks: list[tuple[AgentId, TurnInput]]) -> list[TurnOutput | OrchError]:
        raise AssertionError("not used by the executor")

    async def signal(self, target: WorkflowId, signal: SignalPayload) -> None:
        return None

    async def query(self, target: WorkflowId, query: QueryPayload) -> Any:
        return None


class Ledger:
    def __init__(self) -> None:
        self.recorded: list[str] = []

    def applied(self, address: str) -> EffectOutcome | None:
        return None

    async def record(self, address: str, outcome: EffectOutcome) -> None:
        self.recorded.append(address)


async def test_three_delegates_run_at_once_and_report_in_the_order_asked() -> None:
    orchestrator = Gathering(3)
    told: list[tuple[str, str | None]] = []

    async def on_outcome(outcome: EffectOutcome, depth: int, source: AgentId | None) -> None:
        told.append((str(outcome.agent), effect_address()))

    executor = EffectExecutor(None, orchestrator, on_outcome=on_outcome)
    report = await executor.apply(output(delegate("a"), delegate("b"), delegate("c")), source=AgentId("lead"))
    assert orchestrator.most == 3
    assert orchestrator.finished == ["c", "b", "a"]  # they finished in reverse ...
    assert [o.index for o in report.outcomes] == [0, 1, 2]  # ... and are reported as asked
    assert [str(o.agent) for o in report.outcomes] == ["a", "b", "c"]
    assert [o.child_output.message.as_text() for o in report.outcomes if o.child_output] == ["a", "b", "c"]
    assert told == [("a", "0"), ("b", "1"), ("c", "2")]
    # each child was dispatched with its own effect's address (a ledger keys its child by it)
    assert sorted(orchestrator.started) == [("a", "0"), ("b", "1"), ("c", "2")]


async def test_each_child_s_follow_ups_run_with_it_and_are_told_before_its_delegate() -> None:
    store = InMemoryStore()
    writes: dict[str, list[Effect]] = {
        name: [WriteMemory(scope=Scope.global_(), key=name, value=1)] for name in ("a", "b")
    }
    orchestrator = Gathering(2, writes)
    told: list[str | None] = []

    async def on_outcome(outcome: EffectOutcome, depth: int, source: AgentId | None) -> None:
        told.append(effect_address())

    ledger = Ledger()
    executor = EffectExecutor(store, orchestrator, on_outcome=on_outcome, ledger=ledger)
    report = await executor.apply(output(delegate("a"), delegate("b")), source=AgentId("lead"))
    assert [o.follow_up.outcomes[0].status for o in report.outcomes if o.follow_up] == ["ok", "ok"]
    assert await store.read(Scope.global_(), "a") == 1 and await store.read(Scope.global_(), "b") == 1
    # a follow-up is told of before the delegate that caused it; the delegates in order
    assert told.index("0.0") < told.index("0") < told.index("1") and told.index("1.0") < told.index("1")
    assert sorted(ledger.recorded) == ["0", "0.0", "1", "1.0"]


async def test_a_failed_child_does_not_stop_its_siblings() -> None:
    orchestrator = Gathering(3)
    executor = EffectExecutor(None, orchestrator)
    report = await executor.apply(output(delegate("a"), delegate("broken"), delegate("c")))
    assert [o.status for o in report.outcomes] == ["ok", "error", "ok"]
    assert "the child failed" in (report.outcomes[1].detail or "")


async def test_only_consecutive_delegates_run_together() -> None:
    orchestrator = Gathering(1)
    store = InMemoryStore()
    write = WriteMemory(scope=Scope.global_(), key="between", value=1)
    executor = EffectExecutor(store, orchestrator)
    report = await executor.apply(output(delegate("a"), write, delegate("b")))
    assert orchestrator.most == 1 and [o.status for o in report.outcomes] == ["ok", "ok", "ok"]


async def test_with_stop_on_error_delegates_wait_for_each_other() -> None:
    orchestrator = Gathering(1)
    executor = EffectExecutor(None, orchestrator, stop_on_error=True)
    report = await executor.apply(output(delegate("broken"), delegate("b")))
    assert orchestrator.most == 1
    assert [o.status for o in report.outcomes] == ["error", "skipped"]


async def test_the_follow_up_limit_is_taken_in_the_order_asked() -> None:
    orchestrator = Gathering(2)
    executor = EffectExecutor(None, orchestrator, max_follow_ups=2)
    report = await executor.apply(output(delegate("a"), delegate("b"), delegate("c")))
    assert [o.status for o in report.outcomes] == ["ok", "ok", "limit_reached"]


async def test_a_listener_that_fails_cancels_the_siblings_still_running() -> None:
    class Slow(Gathering):
        async def dispatch(self, agent: AgentId, input: TurnInput) -> TurnOutput:
            if str(agent) == "slow":
                self.started.append(("slow", effect_address()))
                await asyncio.sleep(30)
            return output()

    orchestrator = Slow(1)

    async def on_outcome(outcome: EffectOutcome, depth: int, source: AgentId | None) -> None:
        raise RuntimeError("the record could not be written")

    executor = EffectExecutor(None, orchestrator, on_outcome=on_outcome)
    task = asyncio.create_task(executor.apply(output(delegate("fast"), delegate("slow"))))
    with pytest.raises(RuntimeError, match="could not be written"):
        await task
    assert orchestrator.started == [("slow", "1")]
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

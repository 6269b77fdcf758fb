"""Hooks: each action at each point, error isolation, the HookContext counters, BudgetHook."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import BudgetHook, HookRegistry, NeuronTurn, ToolResultPart, tool
from layer0 import (
    ExitReason,
    HookContext,
    HookContinue,
    HookHalt,
    HookModifyToolInput,
    HookPoint,
    HookSkipTool,
    TurnInput,
)

from .turn_helpers import Recorder, ScriptedHook, add, result_parts

P = HookPoint


def two_calls() -> FakeProvider:
    return FakeProvider(
        [
            tool_response(("t1", "add", {"a": 1, "b": 2}), cost=Decimal("0.5")),
            text_response("3", cost=Decimal("0.25")),
        ]
    )


async def run(hook: object, provider: FakeProvider | None = None) -> tuple[object, FakeProvider]:
    provider = provider or two_calls()
    turn = NeuronTurn(provider, tools=[add], hooks=[hook], effect_tools=["signal"])  # type: ignore[list-item]
    return await turn.execute(TurnInput.new("1+2")), provider


async def test_halt_at_pre_inference_calls_no_model() -> None:
    out, provider = await run(ScriptedHook({P.PRE_INFERENCE: [HookHalt(reason="not now")]}))
    assert out.exit_reason == ExitReason.observer_halt("not now")  # type: ignore[attr-defined]
    assert provider.calls == 0


async def test_halt_at_post_inference_closes_open_tool_calls() -> None:
    hook = ScriptedHook({P.POST_INFERENCE: [HookHalt(reason="saw enough")]})
    provider = two_calls()
    turn = NeuronTurn(provider, tools=[add], hooks=[hook])
    session = turn.start(TurnInput.new("1+2"))
    out = await session.run()
    assert out is not None and out.exit_reason == ExitReason.observer_halt("saw enough")
    assert provider.calls == 1 and out.metadata.tools_called == []
    results = result_parts(session.state.messages)
    assert results == [
        ToolResultPart(tool_use_id="t1", content="not run: the turn was halted by an observer", is_error=True)
    ]
    assert hook.seen[0].model_output is not None
    assert hook.seen[0].model_output.as_blocks()[0].type == "tool_use"


async def test_halt_at_pre_tool_use_runs_no_tool() -> None:
    ran: list[int] = []

    @tool
    async def count() -> int:
        """Count."""
        ran.append(1)
        return 1

    provider = FakeProvider([tool_response(("t1", "count", {})), text_response("x")])
    hook = ScriptedHook({P.PRE_TOOL_USE: [HookHalt(reason="no tools")]})
    out = await NeuronTurn(provider, tools=[count], hooks=[hook]).execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.observer_halt("no tools")
    assert ran == [] and hook.seen[0].tool_name == "count" and hook.seen[0].tool_input == {}


async def test_skip_tool_backfills_a_policy_result_and_skips_the_call() -> None:
    provider = FakeProvider(
        [tool_response(("t1", "add", {"a": 1, "b": 2}), ("t2", "add", {"a": 5, "b": 5})), text_response("ok")]
    )
    hook = ScriptedHook({P.PRE_TOOL_USE: [HookSkipTool(reason="adds are rationed")]})
    out, _ = await run(hook, provider)
    assert result_parts(provider.requests[1].messages) == [
        ToolResultPart(tool_use_id="t1", content="skipped by policy: adds are rationed", is_error=True),
        ToolResultPart(tool_use_id="t2", content="10"),
    ]
    assert [r.name for r in out.metadata.tools_called] == ["add"]  # type: ignore[attr-defined]


async def test_skip_tool_applies_to_effect_tools_too() -> None:
    provider = FakeProvider(
        [tool_response(("t1", "signal", {"target": "w", "signal_type": "ping"})), text_response("ok")]
    )
    out, _ = await run(ScriptedHook({P.PRE_TOOL_USE: [HookSkipTool(reason="quiet")]}), provider)
    assert out.effects == []  # type: ignore[attr-defined]


async def test_modify_tool_input_at_pre_tool_use() -> None:
    rec = Recorder()
    hooks = [
        ScriptedHook({P.PRE_TOOL_USE: [HookModifyToolInput(new_input={"a": 40, "b": 2})]}),
        second := ScriptedHook({P.PRE_TOOL_USE: []}),
    ]
    provider = two_calls()
    await NeuronTurn(provider, tools=[add], hooks=hooks, events=rec).execute(TurnInput.new("x"))
    assert result_parts(provider.requests[1].messages) == [ToolResultPart(tool_use_id="t1", content="42")]
    assert second.seen[0].tool_input == {"a": 40, "b": 2}  # later hooks see the new input
    started = next(e for e in rec.events if e.type == "tool_started")
    assert started.input == {"a": 40, "b": 2}  # type: ignore[union-attr]


async def test_modified_input_is_still_validated() -> None:
    provider = two_calls()
    hook = ScriptedHook({P.PRE_TOOL_USE: [HookModifyToolInput(new_input={"a": "x"})]})
    await run(hook, provider)
    assert result_parts(provider.requests[1].messages)[0].is_error


async def test_halt_at_post_tool_use_keeps_the_results() -> None:
    hook = ScriptedHook({P.POST_TOOL_USE: [HookHalt(reason="got it")]})
    out, provider = await run(hook)
    assert out.exit_reason == ExitReason.observer_halt("got it")  # type: ignore[attr-defined]
    assert provider.calls == 1
    assert hook.seen[0].tool_name == "add" and hook.seen[0].tool_result == "3"


async def test_halt_at_exit_check() -> None:
    out, provider = await run(ScriptedHook({P.EXIT_CHECK: [HookHalt(reason="checked")]}))
    assert out.exit_reason == ExitReason.observer_halt("checked")  # type: ignore[attr-defined]
    assert provider.calls == 1


@pytest.mark.parametrize("point", [P.PRE_INFERENCE, P.POST_INFERENCE, P.POST_TOOL_USE, P.EXIT_CHECK])
async def test_tool_actions_elsewhere_are_ignored_with_a_warning(
    point: HookPoint, caplog: pytest.LogCaptureFixture
) -> None:
    hook = ScriptedHook({point: [HookSkipTool(reason="x"), HookModifyToolInput(new_input={})]})
    with caplog.at_level(logging.WARNING, logger="airlock.turn._hooks"):
        out, provider = await run(hook)
    assert out.exit_reason == ExitReason.complete()  # type: ignore[attr-defined]
    assert result_parts(provider.requests[1].messages) == [ToolResultPart(tool_use_id="t1", content="3")]
    assert any("only continue/halt count" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("point", list(HookPoint))
async def test_a_failing_hook_is_logged_and_never_halts(
    point: HookPoint, caplog: pytest.LogCaptureFixture
) -> None:
    hook = ScriptedHook({point: [RuntimeError("hook bug")] * 3})
    with caplog.at_level(logging.WARNING, logger="airlock.turn._hooks"):
        out, _ = await run(hook)
    assert out.exit_reason == ExitReason.complete()  # type: ignore[attr-defined]
    assert any("hook bug" in r.getMessage() for r in caplog.records)


async def test_context_carries_running_counters() -> None:
    hook = ScriptedHook({p: [] for p in HookPoint})
    await run(hook)
    by_point = [(c.point, c.turns_completed, c.tokens_used, c.cost) for c in hook.seen]
    assert by_point == [
        (P.PRE_INFERENCE, 0, 0, Decimal(0)),
        (P.POST_INFERENCE, 1, 15, Decimal("0.5")),
        (P.PRE_TOOL_USE, 1, 15, Decimal("0.5")),
        (P.POST_TOOL_USE, 1, 15, Decimal("0.5")),
        (P.EXIT_CHECK, 1, 15, Decimal("0.5")),
        (P.PRE_INFERENCE, 1, 15, Decimal("0.5")),
        (P.POST_INFERENCE, 2, 30, Decimal("0.75")),
    ]
    assert all(c.elapsed >= 0 for c in hook.seen)


async def test_hooks_only_fire_at_their_points() -> None:
    hook = ScriptedHook({P.EXIT_CHECK: []})
    await run(hook)
    assert [c.point for c in hook.seen] == [P.EXIT_CHECK]


async def test_registry_runs_hooks_in_order_and_first_halt_wins() -> None:
    a = ScriptedHook({P.EXIT_CHECK: [HookHalt(reason="a")]})
    b = ScriptedHook({P.EXIT_CHECK: [HookHalt(reason="b")]})
    reg = HookRegistry([a, b])
    decision = await reg.fire(HookContext.new(P.EXIT_CHECK))
    assert decision.halt == "a" and b.seen == []


# -- BudgetHook --------------------------------------------------------------------------


async def test_budget_hook_halts_at_budget() -> None:
    out, provider = await run(BudgetHook(Decimal("0.5")))
    assert out.exit_reason.kind == "observer_halt"  # type: ignore[attr-defined]
    assert "budget of $0.5 reached" in (out.exit_reason.reason or "")  # type: ignore[attr-defined]
    assert provider.calls == 1


async def test_budget_hook_continues_under_budget_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    hook = BudgetHook(Decimal("1.00"), warn_at=Decimal("0.5"))
    with caplog.at_level(logging.WARNING, logger="airlock.turn._hooks"):
        out, _ = await run(hook)
    assert out.exit_reason == ExitReason.complete()  # type: ignore[attr-defined]
    warnings = [r for r in caplog.records if "budget" in r.getMessage()]
    assert len(warnings) == 1


async def test_budget_hook_decisions() -> None:
    hook = BudgetHook(Decimal("0.10"), warn_at=None)
    under = HookContext.new(P.EXIT_CHECK).model_copy(update={"cost": Decimal("0.0999")})
    at = under.model_copy(update={"cost": Decimal("0.10")})
    assert await hook.on_event(under) == HookContinue()
    assert isinstance(await hook.on_event(at), HookHalt)
    with pytest.raises(ValueError):
        BudgetHook(Decimal("-1"))


async def test_post_tool_use_fires_for_each_call_as_its_result_is_in() -> None:
    """layer0: PostToolUse fires after each tool, with its result; a fast call's hook does not
    wait for a slow sibling of the same step."""
    import asyncio

    slow_done = asyncio.Event()
    seen_while_slow_ran: list[str] = []

    @tool
    async def slow() -> str:
        """Takes a while."""
        await asyncio.sleep(0.2)
        slow_done.set()
        return "slow done"

    @tool
    async def fast() -> str:
        """Returns at once."""
        return "fast done"

    class Watching(ScriptedHook):
        async def on_event(self, ctx):  # type: ignore[no-untyped-def]
            if ctx.point is P.POST_TOOL_USE and not slow_done.is_set():
                seen_while_slow_ran.append(str(ctx.tool_name))
            return await super().on_event(ctx)

    hook = Watching({P.POST_TOOL_USE: []})
    provider = FakeProvider([tool_response(("t1", "slow", {}), ("t2", "fast", {})), text_response("ok")])
    await NeuronTurn(provider, tools=[slow, fast], hooks=[hook]).execute(TurnInput.new("x"))
    assert seen_while_slow_ran == ["fast"]
    assert [(c.tool_name, c.tool_result) for c in hook.seen if c.point is P.POST_TOOL_USE] == [
        ("fast", "fast done"),
        ("slow", "slow done"),
    ]

"""Pause and Resume over real gRPC: both idempotent, one Resume per pause always resumes, a
resumed turn runs to completion, and the stream holds one ``paused`` event per actual pause."""

from __future__ import annotations

from pathlib import Path

from .runner_streams import Runner, gated_step, open_gate, request


async def test_pause_twice_then_one_resume_completes_a_paused_turn(runner: Runner) -> None:
    stream = runner.execute(request([], "ex-1", start_paused=True))
    await stream.until("paused")
    await runner.pause("ex-1")  # already paused: no-op
    await runner.pause("ex-1")
    await runner.resume("ex-1")
    kinds = await stream.end()
    assert kinds[-1] == "output", (kinds, stream.error)
    assert kinds.count("paused") == 1


async def test_pauses_before_and_at_the_boundary_are_one_pause(runner: Runner, workspace: Path) -> None:
    stream = runner.execute(request([gated_step("go1", "a")], "ex-2"))
    await stream.until("tool_started")
    await runner.pause("ex-2")
    await runner.pause("ex-2")  # a pause already pending: no-op
    open_gate(workspace, "go1")
    await stream.until("paused")
    await runner.pause("ex-2")  # paused: no-op
    await runner.resume("ex-2")
    kinds = await stream.end()
    assert kinds[-1] == "output", (kinds, stream.error)
    assert kinds.count("paused") == 1


async def test_resume_of_a_running_turn_is_a_no_op(runner: Runner, workspace: Path) -> None:
    stream = runner.execute(request([gated_step("go1", "a"), gated_step("go2", "b")], "ex-3"))
    await stream.until("tool_started")
    await runner.resume("ex-3")  # running: nothing to resume
    await runner.pause("ex-3")
    await runner.resume("ex-3")  # takes the pending pause back: the turn does not stop
    open_gate(workspace, "go1")
    await stream.until("tool_started", 2)  # past the boundary without a pause
    assert "paused" not in stream.kinds
    await runner.pause("ex-3")  # an earlier Resume does not cancel a later pause
    open_gate(workspace, "go2")
    await stream.until("paused")
    await runner.resume("ex-3")
    kinds = await stream.end()
    assert kinds[-1] == "output", (kinds, stream.error)
    assert kinds.count("paused") == 1

"""LocalProcessEnvironment with a real runner subprocess (no Docker)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from airlock.build import build_turn
from airlock.sandbox.process import LocalProcessEnvironment
from airlock.spec import AgentSpec
from airlock.testing import bash_agent
from airlock.turn import ToolFinished
from layer0 import EnvironmentSpec, ExitReason, ProcessIsolation, TurnInput


def agent(command: str) -> AgentSpec:
    return bash_agent(command, final="finished")


async def test_runs_in_a_subprocess_with_a_private_workspace(tmp_path: Path) -> None:
    events: list[Any] = []

    async def sink(e: Any) -> None:
        events.append(e)

    spec = agent("pwd; echo $$; env | grep -c AIRLOCK_RUNNER_TOKEN")
    turn = build_turn(spec, workspace=tmp_path)
    out = await LocalProcessEnvironment().run(
        turn, TurnInput.new("go"), EnvironmentSpec(isolation=[ProcessIsolation()]), events=sink
    )
    local = await build_turn(spec, workspace=tmp_path).execute(TurnInput.new("go"))
    assert out.exit_reason == ExitReason.complete() and out.message == local.message
    result = json.loads(next(e for e in events if isinstance(e, ToolFinished)).output)
    cwd, pid, tokens = result["stdout"].split()
    assert "airlock-proc-" in cwd and cwd != str(tmp_path)
    assert not await asyncio.to_thread(Path(cwd).exists)  # removed at teardown
    assert int(pid) > 0 and tokens == "0"  # the token never reaches tool processes


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    env = LocalProcessEnvironment(turn_timeout=2)
    began = time.monotonic()
    out = await env.run(
        build_turn(agent("sleep 60"), workspace=tmp_path), TurnInput.new("go"), EnvironmentSpec()
    )
    assert out.exit_reason == ExitReason.timeout()
    assert time.monotonic() - began < 8


def proc_dirs() -> set[str]:
    return {str(p) for p in Path(tempfile.gettempdir()).glob("airlock-proc-*")}


async def test_cancel_stops_the_runner(tmp_path: Path) -> None:
    before = await asyncio.to_thread(proc_dirs)
    env = LocalProcessEnvironment()
    task = asyncio.create_task(
        env.run(
            build_turn(agent("sleep 60"), workspace=tmp_path),
            TurnInput.new("go"),
            EnvironmentSpec(),
        )
    )
    await asyncio.sleep(1.5)
    task.cancel()
    began = time.monotonic()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert time.monotonic() - began < 5
    assert await asyncio.to_thread(proc_dirs) <= before  # its private dirs are gone

"""bash: no process of a command's tree outlives the call, even after setsid, double forks,
nohup + disown, ignored SIGTERM, a timeout, or the command killing its own supervisor.

Each command writes the pids of its background processes to ``pids`` and waits until they
all run; after the call every one of them must be gone from /proc (not even a zombie).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from airlock.build import build_turn
from airlock.errors import ToolError
from airlock.sandbox.process import LocalProcessEnvironment
from airlock.testing import bash_agent
from airlock.tools import build_tools
from airlock.turn import ToolContext, ToolFinished
from layer0 import EnvironmentSpec, ExitReason, TurnInput

CTX = ToolContext(tool_use_id="t1")

#: Waits until ``pids`` holds $1 lines and each of those processes exists.
WAIT_FOR = (
    'wait_for() { for i in $(seq 400); do [ "$(cat pids 2>/dev/null | wc -l)" -ge "$1" ] && '
    "for p in $(cat pids); do [ -e /proc/$p ] || continue 2; done && return; sleep 0.02; done; "
    "echo never-started >&2; exit 99; }\n"
)

ESCAPES = {
    "setsid": "setsid sh -c 'echo $$ >> pids; exec sleep 300' &\nwait_for 1",
    "double fork + setsid": "(setsid sh -c 'sh -c \"echo \\$\\$ >> pids; exec sleep 300\" &' &)\nwait_for 1",
    "nohup + disown": "nohup sh -c 'echo $$ >> pids; exec sleep 300' >/dev/null 2>&1 &\ndisown\nwait_for 1",
    "ignores SIGTERM and HUP": (
        "setsid sh -c 'trap \"\" TERM HUP INT; echo $$ >> pids; while :; do sleep 1; done' &\nwait_for 1"
    ),
}


def _gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def _wait_for_file(path: Path) -> None:
    while not path.exists():
        time.sleep(0.02)


def _pids(workspace: Path) -> list[int]:
    return [int(line) for line in (workspace / "pids").read_text().split()]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


async def _bash(ws: Path, command: str, **input: Any) -> Any:
    (tool,) = build_tools(["bash"], {}, ws)
    return await tool.call({"command": WAIT_FOR + command, **input}, CTX)


@pytest.mark.parametrize("how", sorted(ESCAPES))
async def test_background_processes_that_left_the_session_are_killed(ws: Path, how: str) -> None:
    result = await _bash(ws, ESCAPES[how] + "\necho started; exit 5")
    assert result == {"exit_code": 5, "stdout": "started\n", "stderr": ""}
    pids = _pids(ws)
    assert pids and all(_gone(pid) for pid in pids), pids


async def test_a_timeout_kills_a_background_tree(ws: Path) -> None:
    # A session leader that ignores SIGTERM, with a child of its own.
    command = (
        'setsid sh -c \'trap "" TERM; echo $$ >> pids; sh -c "echo \\$\\$ >> pids; exec sleep 300" &'
        " sleep 300' &\nwait_for 2; sleep 300"
    )
    with pytest.raises(ToolError) as e:
        await _bash(ws, command, timeout_s=2)
    assert "timed out after 2s; all its processes were killed" in e.value.message
    pids = _pids(ws)
    assert pids and all(_gone(pid) for pid in pids), pids


async def test_cancellation_kills_a_background_tree(ws: Path) -> None:
    task = asyncio.create_task(_bash(ws, ESCAPES["setsid"] + "\ntouch ready; sleep 300"))
    await asyncio.to_thread(_wait_for_file, ws / "ready")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pids = _pids(ws)
    assert pids and all(_gone(pid) for pid in pids), pids


async def test_output_and_exit_status_are_unchanged(ws: Path) -> None:
    result = await _bash(ws, "echo out; echo err >&2; yes | head -c 3 >/dev/null; kill -TERM $$")
    assert result == {"exit_code": -15, "signal": "SIGTERM", "stdout": "out\n", "stderr": "err\n"}


async def test_parallel_calls_do_not_disturb_each_other(ws: Path) -> None:
    (tool,) = build_tools(["bash"], {}, ws)
    slow = asyncio.create_task(tool.call({"command": "sleep 1; echo slow"}, CTX))
    fast = [await tool.call({"command": f"echo {i}"}, CTX) for i in range(3)]
    assert fast == [{"exit_code": 0, "stdout": f"{i}\n", "stderr": ""} for i in range(3)]
    assert await slow == {"exit_code": 0, "stdout": "slow\n", "stderr": ""}


# --- through the real runner (process backend): the runner adopts and kills orphans -------------


async def _run_in_runner(workspace: Path, *commands: str) -> list[dict[str, Any]]:
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    out = await LocalProcessEnvironment().run(
        build_turn(bash_agent(*commands), workspace=workspace),
        TurnInput.new("go"),
        EnvironmentSpec(),
        events=sink,
    )
    assert out.exit_reason == ExitReason.complete()
    finished = [e for e in events if isinstance(e, ToolFinished)]
    return [json.loads(e.output) if e.success else {"error": e.output} for e in finished]


async def test_a_command_that_kills_its_supervisor_leaves_no_orphan(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = WAIT_FOR.replace("pids", str(pids)) + (
        f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' &\n"
        f"wait_for 1; echo $$ >> {pids}; kill -KILL $PPID; sleep 300"
    )
    first, second = await _run_in_runner(tmp_path, command, f"cat {pids}; echo listed")
    assert "supervisor was killed" in first["error"]
    left = [int(p) for p in pids.read_text().split()]
    assert len(left) == 2 and all(_gone(pid) for pid in left), left
    assert second["exit_code"] == 0


async def test_in_the_runner_setsid_processes_do_not_outlive_the_call(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = WAIT_FOR.replace("pids", str(pids)) + ESCAPES["double fork + setsid"].replace("pids", str(pids))
    (result,) = await _run_in_runner(tmp_path, command)
    assert result["exit_code"] == 0
    left = [int(p) for p in pids.read_text().split()]
    assert left and all(_gone(pid) for pid in left), left


async def test_a_runner_killed_mid_call_leaves_no_tree(tmp_path: Path) -> None:
    """The process backend SIGKILLs its runner's group on cancel; the command's own session is
    not in it. Each supervisor gets SIGTERM when its runner dies and kills its tree."""
    pids = tmp_path / "pids"
    command = WAIT_FOR.replace("pids", str(pids)) + (
        f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' &\nwait_for 1; echo $$ >> {pids}; sleep 300"
    )
    task = asyncio.create_task(_run_in_runner(tmp_path, command))
    await asyncio.to_thread(_wait_for_lines, pids, 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    left = [int(p) for p in pids.read_text().split()]
    await asyncio.to_thread(_wait_until_gone, left, 10)
    assert all(_gone(pid) for pid in left), left


def _wait_for_lines(path: Path, n: int) -> None:
    while not path.exists() or len(path.read_text().split()) < n:
        time.sleep(0.05)


def _wait_until_gone(pids: list[int], within: float) -> None:
    deadline = time.monotonic() + within
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)

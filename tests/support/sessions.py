"""Long-lived sandboxes on any backend: three jobs in one box, and what each must show."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airlock.sandbox import LongLivedBox, SandboxBusy, SandboxRequest
from airlock.testing import bash_agent
from airlock.turn import ToolFinished
from layer0 import EnvironmentSpec, ExitReason, TurnInput

#: Each job appends a line to a workspace file, then reports how many lines it holds and the
#: pid of its tool shell's grandparent (the runner): job 3 reads what jobs 1 and 2 wrote.
COMMAND = "echo line >> notes.txt; wc -l < notes.txt; cut -d' ' -f4 /proc/$PPID/stat"


def session_request(environment: EnvironmentSpec | None = None) -> SandboxRequest:
    """The session's request: an agent running :data:`COMMAND` once per job."""
    return SandboxRequest.compile(
        bash_agent(COMMAND), TurnInput.new("open"), environment or EnvironmentSpec()
    )


async def run_job(session: LongLivedBox[Any], n: int, busy: list[BaseException]) -> tuple[int, str]:
    """Job ``n``: the line count and runner pid its tool printed. While it runs, a second job
    is tried from inside its event sink, and what refused it lands in ``busy``."""
    stdout: list[str] = []

    async def sink(event: Any) -> None:
        if isinstance(event, ToolFinished):
            stdout.append(json.loads(event.output)["stdout"])
            with pytest.raises(SandboxBusy) as refused:
                await session.run(TurnInput.new("overlap"))
            busy.append(refused.value)

    output = await session.run(TurnInput.new(f"job {n}"), sink)
    assert output.exit_reason == ExitReason.complete(), output
    [printed] = stdout
    count, pid = printed.split()
    return int(count), pid


async def three_jobs_share_the_box(session: LongLivedBox[Any]) -> int:
    """Three jobs one after another: the file grows, the runner stays, overlap is refused.
    Returns the runner's pid (as the box sees it)."""
    busy: list[BaseException] = []
    seen = [await run_job(session, n, busy) for n in (1, 2, 3)]
    assert [count for count, _ in seen] == [1, 2, 3]
    assert len({pid for _, pid in seen}) == 1, seen
    assert len(busy) == 3
    assert await session.alive()
    return int(seen[0][1])

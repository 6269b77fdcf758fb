"""Run a set-up command asynchronously, streaming its output lines."""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CommandResult:
    """Exit code and the last output lines of a finished command."""

    returncode: int
    tail: str


async def run_streaming(
    argv: Sequence[str],
    *,
    on_line: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    tail_lines: int = 40,
) -> CommandResult:
    """Run ``argv`` with stdout+stderr merged, calling ``on_line`` for each line.

    Cancelling the awaiting task kills the command.

    Raises:
        OSError: the program could not be started.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=full_env,
        cwd=cwd,
    )
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    assert proc.stdout is not None
    try:
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                break
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            tail.append(line)
            if on_line is not None:
                on_line(line)
        returncode = await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    return CommandResult(returncode=returncode, tail="\n".join(tail))

"""Run host commands as asyncio subprocesses, without blocking the event loop.

:func:`run_command` is the one helper: it runs a command to completion, optionally hands
each output line to a callback as it arrives (progress), keeps the whole stdout when asked
and always the last lines, and kills the command when the awaiting task is cancelled. It
raises only when the program cannot be started; callers turn a non-zero ``returncode`` into
their own error.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CommandResult", "run_command"]

_CHUNK = 64 * 1024
#: A line longer than this (e.g. a progress bar redrawn with ``\r``) is passed on in pieces.
_MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class CommandResult:
    """How a finished command ended and what it wrote."""

    returncode: int
    #: Everything written to stdout (stdout and stderr when merged); "" unless ``keep_stdout``.
    stdout: str
    #: Everything written to stderr; "" when merged into stdout.
    stderr: str
    #: The last output lines (of the merged output when merged, else of stdout).
    tail: str


async def run_command(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
    keep_stdout: bool = False,
    on_line: Callable[[str], None] | None = None,
    tail_lines: int = 40,
) -> CommandResult:
    """Run ``argv`` (stdin from ``/dev/null``) until it exits.

    Args:
        cwd: The working directory (default: this process's).
        env: The command's whole environment (default: this process's).
        merge_stderr: Read stderr into the same stream as stdout (one ordered output).
        keep_stdout: Return all of stdout in ``CommandResult.stdout`` (else only the tail is kept).
        on_line: Called with each line of stdout (of the merged output when merged), without
            its line ending, as it arrives.
        tail_lines: How many last lines ``CommandResult.tail`` holds.

    Raises:
        OSError: the program could not be started (``FileNotFoundError`` when it is missing).
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    try:
        reads = [_read(proc.stdout, keep=keep_stdout, tail=tail if tail_lines > 0 else None, on_line=on_line)]
        if proc.stderr is not None:
            reads.append(_read(proc.stderr, keep=True))
        outputs = await asyncio.gather(*reads)
        returncode = await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    return CommandResult(
        returncode=returncode,
        stdout=outputs[0].decode(errors="replace"),
        stderr=outputs[1].decode(errors="replace") if len(outputs) > 1 else "",
        tail="\n".join(tail),
    )


async def _read(
    stream: asyncio.StreamReader,
    *,
    keep: bool,
    tail: collections.deque[str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> bytes:
    """Read ``stream`` to its end; return it all when ``keep``, and pass its lines on."""
    kept = bytearray()
    pending = b""

    def emit(raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if tail is not None:
            tail.append(line)
        if on_line is not None:
            on_line(line)

    lines_wanted = tail is not None or on_line is not None
    while chunk := await stream.read(_CHUNK):
        if keep:
            kept += chunk
        if not lines_wanted:
            continue
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            emit(raw)
        while len(pending) > _MAX_LINE:
            emit(pending[:_MAX_LINE])
            pending = pending[_MAX_LINE:]
    if pending:
        emit(pending)
    return bytes(kept)

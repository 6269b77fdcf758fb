"""Run host commands without blocking the event loop (asyncio subprocesses)."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from airlock.errors import ImageError

_TAIL = 2000


async def run_command(
    argv: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str | None = None,
) -> str:
    """Run ``argv`` to completion and return its stdout (text).

    Raises:
        ImageError: the command is missing or exits non-zero (the message carries the
            command and the tail of its stderr).
    """
    args = [str(a) for a in argv]
    label = what or shlex.join(args[:4])
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as e:
        raise ImageError(f"{label}: command not found: {args[0]}") from e
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode != 0:
        tail = (err or out).decode(errors="replace")[-_TAIL:].strip()
        raise ImageError(f"{label} failed (exit {proc.returncode}): {tail}")
    return out.decode(errors="replace")

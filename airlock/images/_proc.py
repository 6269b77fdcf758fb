"""Run a host command for an image build: its stdout, or an :class:`ImageError`."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from airlock import subprocesses
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
        result = await subprocesses.run_command(args, cwd=cwd, env=env, keep_stdout=True, tail_lines=0)
    except FileNotFoundError as e:
        raise ImageError(f"{label}: command not found: {args[0]}") from e
    if result.returncode != 0:
        tail = (result.stderr or result.stdout)[-_TAIL:].strip()
        raise ImageError(f"{label} failed (exit {result.returncode}): {tail}")
    return result.stdout

"""The shared async subprocess helper: output, lines, merging, environment, cancellation."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from airlock.subprocesses import run_command

PY = sys.executable


async def test_keeps_stdout_and_stderr_apart_and_reports_the_exit_code() -> None:
    code = "import sys; print('out-1'); print('err-1', file=sys.stderr); print('out-2'); sys.exit(3)"
    result = await run_command([PY, "-c", code], keep_stdout=True)
    assert result.returncode == 3
    assert result.stdout == "out-1\nout-2\n"
    assert result.stderr == "err-1\n"
    assert result.tail == "out-1\nout-2"


async def test_merged_output_streams_lines_and_keeps_only_the_tail() -> None:
    code = "import sys\nfor i in range(10): print(i, file=sys.stderr if i % 2 else sys.stdout, flush=True)"
    seen: list[str] = []
    result = await run_command([PY, "-c", code], merge_stderr=True, on_line=seen.append, tail_lines=3)
    assert seen == [str(i) for i in range(10)]
    assert result.tail == "7\n8\n9"
    assert result.stdout == "" and result.stderr == ""  # nothing kept unless asked


async def test_a_last_line_without_newline_and_crlf_endings_are_lines_too() -> None:
    code = "import sys; sys.stdout.buffer.write(b'a\\r\\nb')"
    seen: list[str] = []
    result = await run_command([PY, "-c", code], on_line=seen.append, keep_stdout=True)
    assert seen == ["a", "b"]
    assert result.stdout == "a\r\nb"


async def test_a_very_long_line_is_passed_on_in_pieces() -> None:
    code = "import sys; sys.stdout.write('x' * 200000)"
    seen: list[str] = []
    await run_command([PY, "-c", code], on_line=seen.append)
    assert "".join(seen) == "x" * 200000
    assert max(len(line) for line in seen) <= 64 * 1024


async def test_environment_and_working_directory(tmp_path: Path) -> None:
    code = "import os; print(os.environ.get('AIRLOCK_T', '-'), os.getcwd())"
    result = await run_command([PY, "-c", code], env={"AIRLOCK_T": "set"}, cwd=tmp_path, keep_stdout=True)
    assert result.stdout.split() == ["set", str(await asyncio.to_thread(tmp_path.resolve))]


async def test_a_missing_program_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await run_command([str(tmp_path / "no-such-program")])


async def test_cancelling_kills_the_command() -> None:
    started = asyncio.Event()
    pids: list[int] = []

    def on_line(line: str) -> None:
        pids.append(int(line))
        started.set()

    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    task = asyncio.create_task(run_command([PY, "-c", code], on_line=on_line))
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # killed and reaped: no such process any more

"""``bash``: run a shell command in the workspace under a per-call supervisor, with a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import ClassVar, Protocol

from pydantic import Field, JsonValue

from airlock.errors import ToolError
from airlock.turn import ToolContext

from ._base import SandboxTool, ToolInput, ToolOptions
from ._orphans import reap_orphans, spawn
from ._workspace import Workspace

#: Environment variables a command never inherits (the runner's own secrets).
_HIDDEN_ENV = ("AIRLOCK_RUNNER_TOKEN",)
#: How long to keep reading output after the supervisor ended. Its tree is dead by then, so
#: the pipes are at EOF at once; the bound only matters if the supervisor itself was killed
#: and nothing adopted its orphans (tools embedded outside the runner).
_DRAIN_S = 2.0
#: After SIGTERM, how long the supervisor gets to kill the tree before it is SIGKILLed.
_STOP_S = 5.0
#: The supervisor script, run by path with ``-I -S`` (stdlib only: fast start).
_SUPERVISOR = str(Path(__file__).with_name("_supervisor.py"))


class BashInput(ToolInput):
    command: str = Field(min_length=1, description="The bash command line to run in the workspace.")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed (at most the configured limit)."
    )


class BashOptions(ToolOptions):
    #: Default and maximum timeout, seconds.
    timeout_s: float = Field(default=120.0, gt=0, le=24 * 3600)
    #: Bytes of stdout and of stderr kept (each); the rest is dropped and counted.
    max_output_bytes: int = Field(default=64 * 1024, gt=0)


class _CappedSink:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        kept = bytes(self.data).decode("utf-8", errors="replace")
        return f"{kept}\n[truncated {self.dropped} bytes]" if self.dropped else kept


class _Sink(Protocol):
    def feed(self, chunk: bytes) -> None: ...


async def _drain(fd: int, sink: _Sink) -> None:
    """Read ``fd`` (a pipe's read end, owned from here on) to EOF into ``sink``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        while chunk := await reader.read(65536):
            sink.feed(chunk)
    finally:
        transport.close()


def _signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; the number itself for one this system does not name."""
    return signal.Signals(signum).name if signum in signal.valid_signals() else str(signum)


def _read_status(fd: int) -> str:
    """The supervisor's status line from ``fd`` (closed here); "" when it wrote none."""
    try:
        os.set_blocking(fd, False)  # its only writer has exited: never blocks anyway
        return os.read(fd, 4096).decode("utf-8", "replace").strip()
    except BlockingIOError:
        return ""
    finally:
        os.close(fd)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the supervisor (it kills the command's tree), SIGKILL it if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), _STOP_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _finish(proc: asyncio.subprocess.Process, readers: asyncio.Future[tuple[None, None]]) -> None:
    """Stop the supervisor if still running, sweep orphans, collect the output."""
    try:
        if proc.returncode is None:
            await _stop(proc)
    finally:
        await reap_orphans(proc.pid)
    try:
        await asyncio.wait_for(asyncio.shield(readers), _DRAIN_S)
    except TimeoutError:
        readers.cancel()


class BashTool(SandboxTool[BashInput, BashOptions]):
    """Runs ``bash -c COMMAND`` in the workspace.

    Each call runs under its own supervisor process (``_supervisor.py``), a child subreaper
    that starts bash in a new session and, when bash ends, kills every process left in the
    tree, including ones that called ``setsid`` or double-forked; on timeout or cancellation
    the supervisor is told to do the same at once. So nothing outlives the call. If the
    command kills its supervisor, the runner (a subreaper too) adopts and kills the rest.
    stdout and stderr are captured separately, each capped (``[truncated N bytes]`` marks a
    cut). The result reports the real exit code (negative: killed by that signal).
    """

    name = "bash"
    description = (
        "Run a bash command in the workspace directory and return its exit code, stdout and stderr. "
        "Background processes do not outlive the command."
    )
    input_model: ClassVar[type[ToolInput]] = BashInput
    options_model: ClassVar[type[ToolOptions]] = BashOptions

    def __init__(self, options: BashOptions, workspace: Workspace) -> None:
        super().__init__(options)
        self.workspace = workspace

    async def run(self, input: BashInput, ctx: ToolContext) -> JsonValue:
        """Run the command; see the class docstring."""
        if "\x00" in input.command:  # no argv can carry it: spawning would raise ValueError
            raise ToolError.invalid_input("command must not contain NUL bytes")
        timeout = min(input.timeout_s or self.options.timeout_s, self.options.timeout_s)
        env = {k: v for k, v in os.environ.items() if k not in _HIDDEN_ENV}
        # Our own pipes, not asyncio's PIPE: the output is read to EOF separately from the
        # wait, and the status pipe tells bash's exit apart from the supervisor's.
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            proc = await spawn(
                sys.executable,
                "-I",
                "-S",
                _SUPERVISOR,
                str(status_w),
                input.command,
                cwd=self.workspace.root,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(status_w,),
                # Its own group: a kill aimed at the runner's group (the process backend's
                # SIGKILL) must not take the supervisor before it kills the tree; it gets
                # SIGTERM when the runner dies instead (PR_SET_PDEATHSIG).
                start_new_session=True,
            )
        except OSError as e:
            for fd in (out_r, err_r, status_r):
                os.close(fd)
            raise ToolError.execution_failed(f"cannot start bash: {e}") from e
        finally:
            for fd in (out_w, err_w, status_w):
                os.close(fd)
        limit = self.options.max_output_bytes
        stdout, stderr = _CappedSink(limit), _CappedSink(limit)
        readers = asyncio.gather(_drain(out_r, stdout), _drain(err_r, stderr))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                timed_out = True
        finally:
            # Also on cancellation: the command and everything it started never outlive the call.
            await asyncio.shield(_finish(proc, readers))
            status = _read_status(status_r)
        output = f"stdout:\n{stdout.text()}\nstderr:\n{stderr.text()}"
        if timed_out:
            raise ToolError.execution_failed(
                f"command timed out after {timeout:g}s; all its processes were killed\n{output}"
            )
        kind, _, detail = status.partition(" ")
        if kind == "error":
            raise ToolError.execution_failed(f"cannot start bash: {detail}")
        if kind != "exit":
            raise ToolError.execution_failed(
                "the command's supervisor was killed or stopped before bash ended (by the command "
                f"itself?); all its processes were killed\n{output}"
            )
        code = int(detail)
        result: dict[str, JsonValue] = {"exit_code": code, "stdout": stdout.text(), "stderr": stderr.text()}
        if code < 0:
            result["signal"] = _signal_name(-code)
        return result

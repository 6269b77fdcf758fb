"""``bash``: run a shell command in the workspace, in its own process group, with a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import ClassVar

from pydantic import Field, JsonValue

from airlock.errors import ToolError
from airlock.turn import ToolContext

from ._base import SandboxTool, ToolInput, ToolOptions
from ._workspace import Workspace

#: Environment variables a command never inherits (the runner's own secrets).
_HIDDEN_ENV = ("AIRLOCK_RUNNER_TOKEN",)
#: How long to keep reading output after the command ended and its group was killed.
_DRAIN_S = 2.0


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


async def _drain(fd: int, sink: _CappedSink) -> None:
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


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group (the command and everything it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class BashTool(SandboxTool[BashInput, BashOptions]):
    """Runs ``bash -c COMMAND`` in the workspace.

    The command gets its own session and process group. On timeout (or cancellation) the
    whole group is killed with SIGKILL; when the command ends, processes it left behind in
    its group are killed too, so nothing outlives the call. stdout and stderr are captured
    separately, each capped (``[truncated N bytes]`` marks a cut). The result reports the
    real exit code (negative: killed by that signal).
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
        timeout = min(input.timeout_s or self.options.timeout_s, self.options.timeout_s)
        env = {k: v for k, v in os.environ.items() if k not in _HIDDEN_ENV}
        # Our own pipes, not asyncio's PIPE: Process.wait() on asyncio pipes also waits for
        # every holder of the pipe (a background child) to close it; we need the exit itself.
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/bash",
                "-c",
                input.command,
                cwd=self.workspace.root,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
            )
        except OSError as e:
            os.close(out_r)
            os.close(err_r)
            raise ToolError.execution_failed(f"cannot start bash: {e}") from e
        finally:
            os.close(out_w)
            os.close(err_w)
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
            # Also on cancellation: the command and its children never outlive the call.
            _kill_group(proc.pid)
            if proc.returncode is None:
                await asyncio.shield(proc.wait())
            try:
                await asyncio.wait_for(asyncio.shield(readers), _DRAIN_S)
            except TimeoutError:
                # A process escaped the group (setsid) and still holds the pipes.
                readers.cancel()
        code = proc.returncode
        if timed_out:
            raise ToolError.execution_failed(
                f"command timed out after {timeout:g}s; its process group was killed\n"
                f"stdout:\n{stdout.text()}\nstderr:\n{stderr.text()}"
            )
        result: dict[str, JsonValue] = {"exit_code": code, "stdout": stdout.text(), "stderr": stderr.text()}
        if code is not None and code < 0:
            result["signal"] = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return result

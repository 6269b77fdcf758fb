"""A stdio MCP server: a command started in the workspace, spoken to over its stdin/stdout.

The command runs under the same per-call supervisor as a ``bash`` call (``_supervisor.py``):
a child subreaper in a session (process group) of its own that kills the server's whole
tree when the server ends, when it is told to stop, or when the runner dies. Its pid is
registered like a bash supervisor's (``_orphans.spawn``), so the runner's sweep after each
bash call leaves it alone. The server's environment is the given one (the runner's, without
its token) plus the spec's ``env``; the last :data:`STDERR_TAIL_BYTES` of its stderr are
kept for error messages. Every wait of the shutdown is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from airlock.errors import SpecError

from ._bash import _HIDDEN_ENV, _STOP_S, _SUPERVISOR, _drain, _read_status, _signal_name
from ._orphans import reap_orphans, spawn

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage

    from airlock.spec import McpServerSpec

    #: What the transport yields to the MCP client: messages in, messages out.
    Streams = tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
    ]

__all__ = ["STDERR_TAIL_BYTES", "StdioServer"]

#: The end of the server's stderr an error message shows.
STDERR_TAIL_BYTES = 2048
#: The longest message line accepted from the server; a longer one ends the connection.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: After its stdin closes, how long the server gets to exit on its own.
_EXIT_S = 2.0
#: How long a writer may take to hand one message to the server's stdin.
_WRITE_S = 30.0


def _short_arg(arg: str) -> str:
    """One argument of a command for messages: quoted, on one line, at most about 60 characters."""
    quoted = shlex.quote(arg).replace("\n", "\\n")
    return quoted if len(quoted) <= 60 else quoted[:40] + "…"


class _Tail:
    """The last ``limit`` bytes of a stream, and how many came before them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess

    def text(self) -> str:
        kept = bytes(self.data).decode("utf-8", errors="replace").strip()
        return f"[{self.dropped} earlier bytes dropped] {kept}" if self.dropped and kept else kept


async def _wait_exit(proc: asyncio.subprocess.Process, timeout: float) -> bool:  # noqa: ASYNC109
    """Whether ``proc`` ended within ``timeout`` (polled: ``wait()`` may also wait for pipes)."""
    deadline = time.monotonic() + timeout
    while proc.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class StdioServer:
    """One stdio MCP server process (see the module docstring); :meth:`streams` starts it.

    Raises:
        SpecError: no workspace, or a command that no process can be given (NUL bytes).
    """

    def __init__(self, spec: McpServerSpec, *, workspace: Path | None, environ: Mapping[str, str]) -> None:
        if workspace is None:
            raise SpecError(
                f"MCP server {spec.name!r} (stdio) needs a workspace directory, and none was given"
            )
        if any("\x00" in part for part in spec.command) or any("\x00" in v for v in spec.env.values()):
            raise SpecError(f"MCP server {spec.name!r}: its command and env must not contain NUL bytes")
        self.spec = spec
        self.workspace = workspace
        self.environ = {k: v for k, v in environ.items() if k not in _HIDDEN_ENV} | dict(spec.env)
        self.stderr = _Tail(STDERR_TAIL_BYTES)
        self.proc: asyncio.subprocess.Process | None = None
        self._status_fd: int | None = None
        self._status = ""
        self._problem: str | None = None

    def where(self) -> str:
        """``stdio: <command>``, for messages (long or multi-line arguments cut)."""
        return (
            "stdio: "
            + " ".join(_short_arg(arg) for arg in self.spec.command[:8])
            + (" …" if len(self.spec.command) > 8 else "")
        )

    async def gone(self) -> str:
        """Why the connection ended: the server's exit (waited for a moment) and its stderr."""
        if self.proc is not None:
            await _wait_exit(self.proc, _EXIT_S)
        return self.describe()

    def describe(self) -> str:
        """The server's state as a sentence (``exited (code 1)``, …) plus its stderr tail."""
        if self._problem is not None:
            what = self._problem
        elif self.proc is None:
            what = "was not started"
        elif self.proc.returncode is None:
            what = "closed its output (still running)"
        else:
            what = self._exit_text()
        tail = self.stderr.text()
        return f"{what}: {tail}" if tail else f"{what} (no stderr)"

    def _exit_text(self) -> str:
        self._take_status()
        kind, _, detail = self._status.partition(" ")
        if kind == "exit":
            code = int(detail)
            if code < 0:
                return f"was killed by {_signal_name(-code)}"
            return f"exited (code {code})"
        if kind == "stopped":
            return "was stopped"
        if kind == "error":
            return f"could not be started ({detail})"
        return "ended (its supervisor was killed)"

    def _take_status(self) -> None:
        """The supervisor's status line, once it has exited (its only writer is gone)."""
        fd, self._status_fd = self._status_fd, None
        if fd is not None:
            self._status = _read_status(fd)

    @contextlib.asynccontextmanager
    async def streams(self) -> AsyncIterator[Streams]:
        """Start the server and yield its message streams; stop it (and its tree) on exit.

        Enter and exit in the same task (it holds an anyio task group).

        Raises:
            OSError: the supervisor cannot be started.
        """
        import anyio
        from mcp.shared.message import SessionMessage

        proc, err_r = await self._spawn()
        inbound_w, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outbound, outbound_r = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_stdout, proc, inbound_w)
                tg.start_soon(self._write_stdin, proc, outbound_r, inbound_w)
                tg.start_soon(_drain, err_r, self.stderr)
                try:
                    yield inbound, outbound
                finally:
                    with anyio.CancelScope(shield=True):
                        outbound.close()
                        inbound.close()
                        await self._stop(proc)
                    tg.cancel_scope.cancel()
        finally:
            self._take_status()

    async def _spawn(self) -> tuple[asyncio.subprocess.Process, int]:
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            self.proc = await spawn(
                sys.executable,
                "-I",
                "-S",
                _SUPERVISOR,
                str(status_w),
                "exec " + shlex.join(self.spec.command),
                cwd=self.workspace,
                env=self.environ,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err_w,
                pass_fds=(status_w,),
                start_new_session=True,
                limit=MAX_MESSAGE_BYTES,
            )
        except BaseException:
            os.close(err_r)
            os.close(status_r)
            raise
        finally:
            os.close(err_w)
            os.close(status_w)
        self._status_fd = status_r
        return self.proc, err_r

    async def _read_stdout(
        self, proc: asyncio.subprocess.Process, inbound: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        """Each line of stdout as a message (a line that is no JSON-RPC message: its error)."""
        import anyio
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        assert proc.stdout is not None
        async with inbound:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # longer than the reader's limit
                    self._problem = (
                        f"sent a message longer than {MAX_MESSAGE_BYTES} bytes (connection closed)"
                    )
                    return
                except (OSError, ConnectionError):
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                item: SessionMessage | Exception
                try:
                    item = SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as e:  # pydantic's ValidationError is one
                    item = e
                try:
                    await inbound.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def _write_stdin(
        self,
        proc: asyncio.subprocess.Process,
        outbound: MemoryObjectReceiveStream[SessionMessage],
        inbound: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Each message to stdin, one JSON line; a server that stops reading ends the connection."""
        import anyio

        assert proc.stdin is not None
        try:
            async with outbound:
                async for message in outbound:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    proc.stdin.write(data.encode("utf-8", "surrogateescape"))
                    with anyio.fail_after(_WRITE_S):
                        await proc.stdin.drain()
        except TimeoutError:
            self._problem = f"stopped reading its input for {_WRITE_S:g}s (connection closed)"
            await inbound.aclose()
        except (OSError, ConnectionError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            await inbound.aclose()  # the session sees the end instead of waiting for an answer

    async def _stop(self, proc: asyncio.subprocess.Process) -> None:
        """Close stdin, give the server a moment, then have the supervisor kill the tree."""
        assert proc.stdin is not None
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.close()
        try:
            if not await _wait_exit(proc, _EXIT_S):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)  # the supervisor kills the tree, then exits
                if not await _wait_exit(proc, _STOP_S):
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await _wait_exit(proc, _STOP_S)
        finally:
            await reap_orphans(proc.pid)

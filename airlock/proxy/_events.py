"""Proxy events: one JSON line per decision, and where the lines go.

Event lines (``model_dump_json``; ``type`` tells them apart)::

    {"type":"egress","time":"2026-11-22T20:31:05.123Z","phase":"decision","client":"172.30.0.5:41234",
     "method":"CONNECT","host":"api.example.com","port":443,"ip":"93.184.216.34","sni":null,
     "allowed":true,"rule":"allow api.example.com:443 (spec.network.rules[0])","reason":"...",
     "bytes_up":null,"bytes_down":null,"duration_ms":null}

``phase`` is ``decision`` (emitted when the proxy decides; a denial has only this one) or
``closed`` (an allowed connection ended; carries ``bytes_up``/``bytes_down`` and
``duration_ms``). The credential proxy emits ``type: "credential_proxy"`` lines, one per
request, with the status code, byte counts and ``redacted`` (how many reflections of the
secret were masked in the response). No event ever holds a secret: every line
passes through ``redact`` with the proxy's secrets before it is written.

Sinks: ``stdout`` (or ``-``), ``file:/path`` (appended), ``unix:/path`` (a stream socket
the controller listens on; reconnected on the next event after a failure). A sink never
blocks the proxy: lines are queued and written by one background task.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal, Protocol, TextIO

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from airlock.policy.secrets import redact

_QUEUE_LIMIT = 10_000


def now() -> str:
    """The current UTC time, ISO 8601 with milliseconds and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    time: str = Field(default_factory=now)
    #: The peer that asked (``ip:port``).
    client: str


class EgressEvent(_Event):
    """One egress proxy decision (``phase="decision"``) or the end of an allowed connection (``"closed"``)."""

    type: Literal["egress"] = "egress"
    phase: Literal["decision", "closed"]
    method: str
    host: str
    port: int
    #: The resolved (checked) IP the proxy connects / connected to; None when denied before resolving.
    ip: str | None = None
    #: The TLS SNI read from a CONNECT tunnel's ClientHello (None: not read, or absent).
    sni: str | None = None
    allowed: bool
    rule: str
    reason: str
    bytes_up: int | None = None
    bytes_down: int | None = None
    duration_ms: int | None = None


class CredentialProxyEvent(_Event):
    """One request forwarded (or refused) by a credential proxy."""

    type: Literal["credential_proxy"] = "credential_proxy"
    credential: str
    method: str
    #: The request path without its query string.
    path: str
    upstream: str
    #: The status returned to the sandbox.
    status: int
    reason: str = ""
    bytes_up: int = 0
    bytes_down: int = 0
    duration_ms: int = 0
    #: How many reflections of the secret were masked in the response (head and body).
    redacted: int = 0


ProxyEvent = Annotated[EgressEvent | CredentialProxyEvent, Field(discriminator="type")]
#: Parses one event line: ``PROXY_EVENT.validate_json(line)``.
PROXY_EVENT: TypeAdapter[EgressEvent | CredentialProxyEvent] = TypeAdapter(ProxyEvent)


class ProxyEventSink(Protocol):
    """Receives proxy events. ``emit`` never blocks on I/O."""

    def emit(self, event: EgressEvent | CredentialProxyEvent) -> None:
        """Record ``event``."""
        ...

    async def aclose(self) -> None:
        """Flush and release resources."""
        ...


class MemorySink:
    """Keeps events in a list (for a controller embedding a proxy, and for tests)."""

    def __init__(self) -> None:
        self.events: list[EgressEvent | CredentialProxyEvent] = []

    def emit(self, event: EgressEvent | CredentialProxyEvent) -> None:
        """Append ``event``."""
        self.events.append(event)

    async def aclose(self) -> None:
        """Nothing to release."""


class LineSink:
    """Writes events as redacted JSON lines through a queue and one writer task."""

    def __init__(
        self, target: str, *, secrets: Iterable[str] = (), warn: Callable[[str], None] | None = None
    ):
        """Args:
        target: ``stdout``/``-``, ``file:/path`` (or a bare path), or ``unix:/path``.
        secrets: Values removed from every line.
        warn: Where sink failures are reported (default: stderr).
        """
        self.target = target
        self._secrets = tuple(secrets)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue(_QUEUE_LIMIT)
        self._task: asyncio.Task[None] | None = None
        self._warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.dropped = 0

    def emit(self, event: EgressEvent | CredentialProxyEvent) -> None:
        """Queue one redacted line (dropped, and counted, if 10 000 lines are already waiting)."""
        line = redact(event.model_dump_json(), self._secrets) + "\n"
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            self._queue.put_nowait(line)
        except asyncio.QueueFull:
            self.dropped += 1

    async def aclose(self) -> None:
        """Write everything queued, then stop."""
        if self._task is None:
            return
        await self._queue.put(None)
        await self._task
        self._task = None

    async def _run(self) -> None:
        kind, _, rest = self.target.partition(":")
        if self.target in ("-", "stdout"):
            await self._run_blocking(_stdout_write)
        elif kind == "unix":
            await self._run_unix(rest)
        else:
            path = Path(rest if kind == "file" else self.target)
            handle = await asyncio.to_thread(path.open, "a", encoding="utf-8")
            try:
                await self._run_blocking(functools.partial(_file_write, handle))
            finally:
                await asyncio.to_thread(handle.close)

    async def _run_blocking(self, write: Callable[[str], object]) -> None:
        while (line := await self._queue.get()) is not None:
            batch = [line]
            while not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    await asyncio.to_thread(write, "".join(batch))
                    return
                batch.append(nxt)
            await asyncio.to_thread(write, "".join(batch))

    async def _run_unix(self, path: str) -> None:
        writer: asyncio.StreamWriter | None = None
        failed = False
        while (line := await self._queue.get()) is not None:
            try:
                if writer is None:
                    _, writer = await asyncio.open_unix_connection(path)
                    failed = False
                writer.write(line.encode("utf-8"))
                await writer.drain()
            except OSError as e:
                self.dropped += 1
                writer = None
                if not failed:
                    self._warn(f"airlock proxy: event sink {self.target} unavailable ({type(e).__name__})")
                    failed = True
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def _stdout_write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _file_write(handle: TextIO, text: str) -> None:
    handle.write(text)
    handle.flush()


class MultiSink:
    """Sends every event to several sinks."""

    def __init__(self, sinks: Iterable[ProxyEventSink]) -> None:
        self.sinks = tuple(sinks)

    def emit(self, event: EgressEvent | CredentialProxyEvent) -> None:
        """Emit to each sink."""
        for sink in self.sinks:
            sink.emit(event)

    async def aclose(self) -> None:
        """Close each sink."""
        for sink in self.sinks:
            await sink.aclose()

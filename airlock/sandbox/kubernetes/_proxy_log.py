"""Following the proxy pod's log: its ready line, then every egress decision as an event.

The proxy bundle writes its events as JSON lines on stdout (``events: ["stdout"]``); the
controller follows the pod's log through the API server (``pods/log?follow=true``), so the
proxy needs no way back to the controller and no ingress from it. Lines are redacted of the
sandbox's secrets before they are parsed; malformed lines are dropped with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from airlock.policy import redact
from layer0 import EnvError

from .._events import SandboxEventSink
from ._api import KubeApi

__all__ = ["READY_LINE", "ProxyLog"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
#: What the bundle prints once every listener is up.
READY_LINE = "airlock-proxy bundle ready"
_TAIL = 30


class ProxyLog:
    """The proxy pod's log, followed in a thread; lines handed to the event loop."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        pod: str,
        *,
        secrets: tuple[str, ...],
        events: SandboxEventSink | None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.pod = pod
        self.secrets = secrets
        self.events = events
        self.lines: list[str] = []
        self.ready = asyncio.Event()
        self.ended = asyncio.Event()
        self._response: Any = None
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self.events_seen = 0

    def start(self) -> None:
        """Begin following (the pod must be running)."""
        self._task = asyncio.create_task(self._follow(), name=f"follow {self.pod}")

    async def wait_ready(self, timeout: float) -> None:  # noqa: ASYNC109
        """Until the bundle says it is ready.

        Raises:
            EnvError: ``provision_failed`` with the proxy's last log lines.
        """
        ready = asyncio.ensure_future(self.ready.wait())
        ended = asyncio.ensure_future(self.ended.wait())
        try:
            await asyncio.wait({ready, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            ended.cancel()
        if not self.ready.is_set():
            why = "exited" if self.ended.is_set() else f"not ready after {timeout:.0f}s"
            tail = "\n".join(self.lines[-_TAIL:]) or "(no output)"
            raise EnvError.provision_failed(f"egress proxy pod {self.pod} {why}; last log lines:\n{tail}")

    async def _follow(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def read() -> None:
            try:
                self._response = self.api.core.read_namespaced_pod_log(
                    self.pod, self.namespace, follow=True, _preload_content=False
                )
                pending = b""
                for chunk in self._response.stream(4096):
                    if self._stop.is_set():
                        break
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for raw in complete:
                        loop.call_soon_threadsafe(queue.put_nowait, raw.decode("utf-8", errors="replace"))
                if pending:
                    loop.call_soon_threadsafe(queue.put_nowait, pending.decode("utf-8", errors="replace"))
            except Exception as e:  # the pod was deleted, the stream cut: the log simply ends
                _log.debug("proxy log of %s ended: %s", self.pod, e)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop may be closed at shutdown
                    loop.call_soon_threadsafe(queue.put_nowait, None)

        reader = asyncio.create_task(asyncio.to_thread(read))
        try:
            while (line := await queue.get()) is not None:
                await self._line(redact(line, self.secrets))
        finally:
            self.ended.set()
            await asyncio.shield(reader)

    async def _line(self, line: str) -> None:
        from airlock.proxy import PROXY_EVENT

        if not line.strip():
            return
        self.lines.append(line)
        del self.lines[:-_TAIL]
        if READY_LINE in line:
            self.ready.set()
            return
        if not line.lstrip().startswith("{"):
            return
        try:
            event = PROXY_EVENT.validate_json(line)
        except ValueError:
            _log.warning("proxy pod %s: malformed event line dropped", self.pod)
            return
        self.events_seen += 1
        if self.events is not None:
            try:
                await self.events(event)
            except Exception:
                _log.exception("event sink failed on a proxy event")

    async def close(self, grace: float = 0.5) -> None:
        """Stop following (after ``grace`` seconds for lines already on their way)."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.ended.wait()), grace)
        self._stop.set()
        if self._response is not None:
            # Shut the socket down under the reading thread (never block the loop on close()).
            with contextlib.suppress(Exception):
                self._response.shutdown()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

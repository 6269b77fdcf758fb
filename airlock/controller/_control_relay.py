"""ControlRelay: a control call on a job that runs in another replica, relayed through the store.

Pause, resume, step, inspect and signals act on a turn's live sandbox, which only the replica
running the job holds. A replica asked about a job another one holds writes the call in
``controls`` addressed to that replica; the owner (woken by ``NOTIFY airlock_controls``, or
its next look) runs it on its own controls and writes the answer, which wakes the asker
(``airlock_answers``). No network path between replicas is needed: the store is the one
thing they share. A call nobody answers in time (its replica died) is refused, naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from airlock.state import Op, execute, fetch_all, fetch_one

from ._service_settings import JobNotAwaiting, JobNotFound
from ._store import JobStore

_log = logging.getLogger("airlock.controller")

#: Runs one relayed call here (the owner): its JSON-able result.
Handler = Callable[[str, Mapping[str, JsonValue]], Awaitable[JsonValue]]

#: The errors a relayed call may answer with, re-raised where it was asked.
_ERRORS: dict[str, type[Exception]] = {"JobNotAwaiting": JobNotAwaiting, "JobNotFound": JobNotFound}


@dataclass(frozen=True)
class _Request:
    n: int
    job_id: str
    call: str
    args: dict[str, JsonValue]


class ControlRelay:
    """Asks the replica that runs a job to run a control call, and answers those asked of this one.

    Args:
        store: the shared job store (``claims.replica`` is this replica).
        handlers: this replica's own controls, by call name.
        timeout_s: how long an asker waits for the owner's answer.
        poll_s: how often it looks when no notification arrives.
    """

    def __init__(
        self,
        store: JobStore,
        handlers: Mapping[str, Handler],
        *,
        timeout_s: float = 30.0,
        poll_s: float = 1.0,
    ) -> None:
        self._store = store
        self._handlers = dict(handlers)
        self._timeout_s = timeout_s
        self._poll_s = poll_s
        self._answered = asyncio.Event()
        self._serving = asyncio.Lock()

    @property
    def replica(self) -> str:
        """This replica's id."""
        return self._store.claims.replica

    async def owner(self, job_id: str) -> str | None:
        """The replica holding ``job_id`` now, if another one does."""
        row = await self._store.run(fetch_one("SELECT claimed_by FROM jobs WHERE id = ?", job_id))
        holder = row[0] if row is not None else None
        return holder if holder and holder != self.replica else None

    async def ask(self, owner: str, job_id: str, call: str, args: Mapping[str, JsonValue]) -> JsonValue:
        """Have ``owner`` run ``call`` on ``job_id``; its result.

        Raises:
            JobNotAwaiting: the owner refused, did not answer in time, or let the job go
                unanswered (it stopped, or was found dead and its jobs adopted: ask again).
            JobNotFound: the owner no longer knows the job.
        """
        row = await self._store.run(
            fetch_one(
                "INSERT INTO controls (replica, job_id, call, args, created_at) "
                "VALUES (?, ?, ?, ?, ?) RETURNING n",
                owner,
                job_id,
                call,
                json.dumps(dict(args)),
                time.time(),
            )
        )
        assert row is not None
        n = int(row[0])
        deadline = time.monotonic() + self._timeout_s
        try:
            while (answer := await self._answer(n)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise JobNotAwaiting(
                        f"job {job_id} runs in controller replica {owner}, which did not answer {call} "
                        f"within {self._timeout_s:g} s"
                    )
                self._answered.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, self._poll_s)):
                        await self._answered.wait()
                await self._still_held(owner, job_id, call, n)
        finally:
            await self._store.run(execute("DELETE FROM controls WHERE n = ?", n))
        return _result(answer)

    async def _still_held(self, owner: str, job_id: str, call: str, n: int) -> None:
        """Raise ``JobNotAwaiting`` when ``owner`` let ``job_id`` go without answering call ``n``."""
        if await self._answer(n) is None and await self.owner(job_id) != owner:
            raise JobNotAwaiting(
                f"job {job_id} left controller replica {owner} before it answered {call} (the "
                "replica stopped, or was found dead and another took its jobs over): try again"
            )

    async def _answer(self, n: int) -> str | None:
        row = await self._store.run(fetch_one("SELECT answer FROM controls WHERE n = ?", n))
        return str(row[0]) if row is not None and row[0] is not None else None

    async def answered(self) -> None:
        """An answer landed (``NOTIFY airlock_answers``): wake the askers (each looks again)."""
        self._answered.set()

    async def serve(self) -> None:
        """Run the calls addressed to this replica and write their answers (one pass)."""
        async with self._serving:
            for request in await self._store.run(self._pending()):
                answer = await self._run(request)
                await self._store.run(
                    execute("UPDATE controls SET answer = ? WHERE n = ?", json.dumps(answer), request.n)
                )

    def _pending(self) -> Op[list[_Request]]:
        rows = yield from fetch_all(
            "SELECT n, job_id, call, args FROM controls WHERE replica = ? AND answer IS NULL ORDER BY n",
            self.replica,
        )
        return [_Request(int(r[0]), r[1], r[2], json.loads(r[3])) for r in rows]

    async def _run(self, request: _Request) -> dict[str, JsonValue]:
        handler = self._handlers.get(request.call)
        if handler is None:
            return {"error": "JobNotAwaiting", "message": f"no control call {request.call!r}"}
        try:
            return {"ok": await handler(request.job_id, request.args)}
        except (JobNotAwaiting, JobNotFound) as e:
            return {"error": type(e).__name__, "message": str(e)}
        except Exception as e:
            _log.exception("relayed %s on job %s failed", request.call, request.job_id)
            return {"error": "JobNotAwaiting", "message": f"{request.call} failed: {type(e).__name__}: {e}"}


def _result(answer: str) -> JsonValue:
    """The result an answer carries, or the error it names raised."""
    body: dict[str, Any] = json.loads(answer)
    if "error" in body:
        raise _ERRORS.get(body["error"], JobNotAwaiting)(body.get("message", "refused"))
    ok: JsonValue = body.get("ok")
    return ok

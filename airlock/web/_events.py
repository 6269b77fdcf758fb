"""``/api/v1/jobs/{id}/events``: a job's events as Server-Sent Events (``id:`` the event's
seq), from the start (a finished job's are replayed) or after ``Last-Event-ID`` (a dropped
stream resumes where it stopped), live until the job's terminal event ends the stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from airlock.jobs import JobEvent

from ._auth import Caller
from ._deps import Service, job_for
from ._errors import invalid

router = APIRouter(prefix="/api/v1/jobs", tags=["events"])

#: Seconds without an event after which the stream sends a comment.
KEEP_ALIVE_S = 15.0
#: Event seqs are signed 64-bit integers; a later position is read as this.
_MAX_SEQ = 2**63 - 1


def sse(event: JobEvent) -> bytes:
    """One event as an SSE message."""
    data = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode()


async def _messages(events: AsyncIterator[JobEvent], keep_alive_s: float) -> AsyncIterator[bytes]:
    """The SSE body: a comment at once (the headers go out), each event, and a comment after
    ``keep_alive_s`` without one (proxies keep the stream open)."""
    yield b": airlock job events\n\n"
    pending: asyncio.Task[JobEvent] | None = None
    try:
        while True:
            pending = pending or asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=keep_alive_s)
            if not done:
                yield b": keep-alive\n\n"
                continue
            pending = None
            try:
                event = done.pop().result()
            except StopAsyncIteration:
                return
            yield sse(event)
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)


def _start(after: int | None, last_event_id: str | None) -> int:
    if last_event_id is None:
        return min(after or 0, _MAX_SEQ)
    if not last_event_id.strip().isdigit():
        raise invalid("Last-Event-ID", "not an event id (a non-negative integer)")
    return min(int(last_event_id), _MAX_SEQ)


@router.get(
    "/{job_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "the job's events (SSE)"}},
)
async def job_events(
    job_id: str,
    principal: Caller,
    service: Service,
    after: Annotated[int | None, Query(ge=0, description="events after this seq")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """The job's events after ``Last-Event-ID`` (else ``after``, else from the first), then
    live ones until it is terminal."""
    start = _start(after, last_event_id)
    await job_for(service, principal, job_id, "see")
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(
        _messages(service.watch(job_id, start), KEEP_ALIVE_S), media_type="text/event-stream", headers=headers
    )

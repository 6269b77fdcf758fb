"""A job's events as Server-Sent Events: ``id:`` is the event's seq, a finished job's are
replayed from the start and the stream ends after its terminal event, ``Last-Event-ID``
resumes after that event, and a live job's events arrive as they happen."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airlock.jobs import JobEvent, JobState, StateChanged, utcnow
from airlock.web._events import _messages

from .world import World, world

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    async with world(tmp_path) as made:
        yield made


def parse(text: str) -> list[dict[str, Any]]:
    """The SSE messages of ``text`` (comments skipped)."""
    messages = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            messages.append(
                {"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])}
            )
    return messages


async def read(client: httpx.AsyncClient, path: str, **headers: str) -> tuple[httpx.Response, str]:
    async with client.stream("GET", path, headers=headers) as response:
        text = (await response.aread()).decode()
    return response, text


async def test_a_finished_job_is_replayed_from_the_start_and_the_stream_ends(w: World) -> None:
    await w.service.cancel(w.red.id, "enough")
    stored = await w.store.events(w.red.id)
    async with w.client("carol") as carol:
        response, text = await read(carol, f"/api/v1/jobs/{w.red.id}/events")
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = parse(text)
    assert [m["id"] for m in messages] == [e.seq for e in stored]
    assert [m["event"] for m in messages] == [e.kind for e in stored]
    assert messages[-1]["data"]["data"]["state"] == "cancelled"
    assert all(m["data"]["job_id"] == w.red.id for m in messages)


async def test_last_event_id_resumes_after_that_event(w: World) -> None:
    await w.service.cancel(w.red.id, "enough")
    stored = await w.store.events(w.red.id)
    assert len(stored) >= 2
    async with w.client("carol") as carol:
        _, text = await read(
            carol, f"/api/v1/jobs/{w.red.id}/events", **{"Last-Event-ID": str(stored[0].seq)}
        )
        _, after = await read(carol, f"/api/v1/jobs/{w.red.id}/events?after={stored[0].seq}")
        bad = await carol.get(f"/api/v1/jobs/{w.red.id}/events", headers={"Last-Event-ID": "x"})
    assert [m["id"] for m in parse(text)] == [e.seq for e in stored[1:]]
    assert parse(after) == parse(text)
    assert bad.status_code == 422 and bad.json()["error"]["fields"] == ["Last-Event-ID"]


async def test_a_live_job_streams_until_its_terminal_event(w: World) -> None:
    alice = w.client("alice")
    async with alice, alice.stream("GET", f"/api/v1/jobs/{w.red.id}/events") as response:
        lines = response.aiter_lines()
        first = await anext(lines)
        assert first.startswith(":")  # the stream is open before anything happens
        seen: list[str] = []
        cancelling = None
        async for line in lines:
            seen.append(line)
            if line.startswith("id:") and cancelling is None:  # the replayed queued event
                cancelling = asyncio.create_task(w.service.cancel(w.red.id, "live"))
        assert cancelling is not None
        await cancelling
    messages = parse("\n".join(seen))
    assert messages[-1]["data"]["data"]["state"] == "cancelled"


async def test_a_quiet_stream_sends_keep_alive_comments_until_the_next_event() -> None:
    release = asyncio.Event()

    async def events() -> AsyncIterator[JobEvent]:
        await release.wait()
        yield JobEvent(job_id="j1", seq=7, time=utcnow(), data=StateChanged(state=JobState.CANCELLED))

    body = _messages(events(), keep_alive_s=0.01)
    assert (await anext(body)).startswith(b":")
    assert await anext(body) == b": keep-alive\n\n"  # nothing happened yet
    release.set()
    chunks = [chunk async for chunk in body if not chunk.startswith(b":")]
    assert [m["id"] for m in parse(b"".join(chunks).decode())] == [7]

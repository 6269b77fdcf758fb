"""Live-only job events: a job's watcher gets the model's text deltas as they are published,
before the call's recorded InferenceFinished, and the job's record never holds them."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

from airlock.controller import SqliteJobStore
from airlock.controller._job_events import JobEvents
from airlock.controller._live_events import LiveBuffer
from airlock.jobs import JobEvent, JobState, SandboxActivity
from airlock.turn import InferenceFinished, InferenceStarted, TextDelta
from layer0 import TurnInput


def _finished() -> InferenceFinished:
    return InferenceFinished(
        iteration=1,
        stop_reason="end_turn",
        tokens_in=1,
        tokens_out=1,
        cost=None,
        total_tokens_in=1,
        total_tokens_out=1,
        total_cost=Decimal(0),
        duration_ms=1,
    )


async def test_a_watcher_sees_deltas_before_the_inference_finished_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        events = JobEvents(store)
        job, _ = await store.create(agent="a", input=TurnInput.new("hi"), state=JobState.RUNNING)
        arrived: asyncio.Queue[JobEvent] = asyncio.Queue()

        async def watch() -> None:
            async for event in events.watch(job.id):
                arrived.put_nowait(event)

        def turn_event(event: JobEvent) -> object:
            return event.data.event if isinstance(event.data, SandboxActivity) else None

        watcher = asyncio.create_task(watch())
        await events.emit(job.id, SandboxActivity(event=InferenceStarted(iteration=1)))
        seen = [await arrived.get(), await arrived.get()]  # created (running), the call started
        for piece in ("The answer ", "is ", "four."):
            events.publish_live(job.id, SandboxActivity(event=TextDelta(iteration=1, text=piece)))
            seen.append(await asyncio.wait_for(arrived.get(), 10))  # while the call still runs
            assert turn_event(seen[-1]) == TextDelta(iteration=1, text=piece)
        await events.emit(job.id, SandboxActivity(event=_finished()))
        await events.transition(job.id, JobState.SUCCEEDED)
        await asyncio.wait_for(watcher, 10)
        while not arrived.empty():
            seen.append(arrived.get_nowait())

    kinds = [type(e.data.event).__name__ if isinstance(e.data, SandboxActivity) else e.kind for e in seen]
    first_delta = kinds.index("TextDelta")
    assert kinds.index("InferenceStarted") < first_delta < kinds.index("InferenceFinished")
    text = "".join(
        e.data.event.text
        for e in seen
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, TextDelta)
    )
    assert text == "The answer is four."
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        stored = await store.events(job.id)
    assert not any(
        isinstance(e.data, SandboxActivity) and isinstance(e.data.event, TextDelta) for e in stored
    )


def test_a_slow_watcher_gets_deltas_merged_and_bounded() -> None:
    buffer = LiveBuffer(max_items=4, max_delta_chars=8)
    for piece in ("abc", "def", "ghi"):
        buffer.push(SandboxActivity(event=TextDelta(iteration=1, text=piece)))
    buffer.push(SandboxActivity(event=TextDelta(iteration=2, text="x")))
    first, second = buffer.take()
    assert isinstance(first, SandboxActivity) and isinstance(first.event, TextDelta)
    assert (first.event.text, first.event.dropped_chars) == ("bcdefghi", 1)
    assert isinstance(second, SandboxActivity) and second.event == TextDelta(iteration=2, text="x")
    assert buffer.take() == []

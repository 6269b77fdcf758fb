"""The runner's event queue: a slow reader gets every event, and the text deltas that waited
merged into one (bounded; what was cut is counted), never mixing model calls."""

from __future__ import annotations

import asyncio

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.runner._event_queue import EventQueue


def delta(text: str, iteration: int = 1) -> pb.TurnEvent:
    return pb.TurnEvent(text_delta=pb.TextDelta(iteration=iteration, text=text))


def started(iteration: int) -> pb.TurnEvent:
    return pb.TurnEvent(inference_started=pb.InferenceStarted(iteration=iteration))


async def drain(queue: EventQueue) -> list[pb.TurnEvent]:
    return [await queue.get() for _ in range(queue.qsize())]


async def test_waiting_deltas_merge_and_other_events_are_all_kept() -> None:
    queue = EventQueue()
    queue.put_nowait(started(1))
    for piece in ("The ", "answer ", "is "):
        queue.put_nowait(delta(piece))
    queue.put_nowait(started(2))
    queue.put_nowait(delta("four", 2))
    queue.put_nowait(delta(".", 2))
    events = await drain(queue)
    assert [e.WhichOneof("kind") for e in events] == [
        "inference_started",
        "text_delta",
        "inference_started",
        "text_delta",
    ]
    assert (events[1].text_delta.text, events[3].text_delta.text) == ("The answer is ", "four.")
    assert queue.merged == 3


async def test_a_reader_far_behind_gets_the_latest_text_and_the_count_of_what_was_cut() -> None:
    queue = EventQueue(max_delta_chars=10)
    for _ in range(8):
        queue.put_nowait(delta("abcd"))
    (event,) = await drain(queue)
    assert event.text_delta.text == "cdabcdabcd" and event.text_delta.dropped_chars == 22
    assert queue.dropped_chars == 22


async def test_a_delta_taken_is_not_merged_into_and_get_waits() -> None:
    queue = EventQueue()
    queue.put_nowait(delta("a"))
    assert (await queue.get()).text_delta.text == "a"
    waiter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.put_nowait(delta("b"))
    assert (await waiter).text_delta.text == "b"

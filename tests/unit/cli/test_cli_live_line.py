"""``jobs watch`` shows the text the model is writing on its live line, from text deltas."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime

from rich.console import Console

from airlock.cli._jobs import JobView, RemoteAgent
from airlock.jobs import Job, JobEvent, JobState, SandboxActivity
from airlock.turn import InferenceStarted, TextDelta
from layer0 import TurnInput

T0 = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
JOB = Job(
    id="j1",
    agent="a",
    state=JobState.RUNNING,
    input=TurnInput.new("hi"),
    queue="a",
    workflow="j1",
    created_at=T0,
)


def test_the_live_line_follows_the_deltas_and_resets_per_call() -> None:
    view = JobView(Console(file=io.StringIO(), width=200), JOB, RemoteAgent("a", "process", "anthropic", "m"))
    shown: list[str] = []
    view.status = shown.append  # type: ignore[method-assign,assignment]

    async def feed(*events: InferenceStarted | TextDelta) -> None:
        for event in events:
            await view.job_event(JobEvent(job_id="j1", seq=1, time=T0, data=SandboxActivity(event=event)))

    asyncio.run(
        feed(
            InferenceStarted(iteration=1),
            TextDelta(iteration=1, text="The answer\nis "),
            TextDelta(iteration=1, text="four."),
            InferenceStarted(iteration=2),
            TextDelta(iteration=2, text="Done."),
        )
    )
    live = [s for s in shown if "writing" in s]
    assert live[0].endswith("…The answer is[/]")
    assert live[1].endswith("…The answer is four.[/]")
    assert live[2] == "model call 2 writing: [dim]…Done.[/]"
    assert len(live[1]) < 200

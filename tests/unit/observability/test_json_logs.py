"""JSON log lines: each parses, carries time, level, logger and message, the job fields inside a
job's run (a real run on the process backend), the trace id under a span, an exception as a
field, and never a record's extras (where callers put data such as an effect's)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from airlock.jobs import Job, JobEvent, JobState, StateChanged, job_log_context
from airlock.observability import JsonFormatter, log_formatter
from airlock.testing import text_step
from layer0 import TurnInput
from tests.support.controller import running_service, write_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """What the ``airlock`` loggers write meanwhile, as JSON lines."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("airlock")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def a_job() -> Job:
    now = datetime.now(UTC)
    return Job(
        id="j1", agent="calc", state=JobState.RUNNING, input=TurnInput.new("hi"), queue="calc",
        workflow="w", created_at=now, tenant="acme",
    )  # fmt: skip


def test_a_line_has_the_record_the_job_the_trace_and_the_exception(lines: io.StringIO) -> None:
    log = logging.getLogger("airlock.test")
    log.info("outside %s", "any job", extra={"token": "s3cret-value"})
    tracer = TracerProvider().get_tracer("test")
    with job_log_context(a_job()), tracer.start_as_current_span("turn") as span:
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed")
    outside, failed = parsed(lines)
    assert outside["message"] == "outside any job" and outside["level"] == "info"
    assert outside["logger"] == "airlock.test" and datetime.fromisoformat(outside["time"])
    assert "job_id" not in outside and "trace_id" not in outside
    assert "s3cret-value" not in lines.getvalue()
    assert failed["job_id"] == "j1" and failed["agent"] == "calc" and failed["tenant"] == "acme"
    assert failed["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert failed["level"] == "error" and "ValueError: boom" in failed["exception"]


def test_the_text_format_is_the_default_lines() -> None:
    record = logging.LogRecord("airlock.x", logging.INFO, __file__, 1, "hello", None, None)
    assert log_formatter("text").format(record).endswith("INFO airlock.x: hello")
    assert json.loads(log_formatter("json").format(record))["message"] == "hello"


async def test_what_is_logged_while_a_job_runs_names_the_job(tmp_path: Path, lines: io.StringIO) -> None:
    agent = {
        "provider": {"kind": "scripted", "script": [text_step("done")]},
        "backend": "process",
        "defaults": {"max_turns": 2, "max_duration": "60s"},
    }
    config = write_config(tmp_path, {"solo": agent})
    log = logging.getLogger("airlock.test")

    def on_event(event: JobEvent, job: Job | None) -> None:
        if isinstance(event.data, StateChanged):
            log.info("state %s", event.data.state.value)

    async with running_service(config, tmp_path / "data", tmp_path / "sb", "unused") as service:
        service.events.subscribe(on_event)
        job = await service.submit("solo", TurnInput.new("go"))
        assert (await service.wait(job.id)).state is JobState.SUCCEEDED
    states = {line["message"]: line for line in parsed(lines) if line["logger"] == "airlock.test"}
    assert "job_id" not in states["state queued"]  # logged by the submitting caller
    running = states["state running"]  # logged where the job runs
    assert (running["job_id"], running["agent"], running["tenant"]) == (job.id, "solo", "default")

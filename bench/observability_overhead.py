"""What metrics and tracing cost the controller: its throughput and the HTTP API's latency with
both off versus on, in one run.

Each round runs the same batch of one-tool jobs (``bash true``, process backend, concurrency
4) through a fresh in-process controller (real JobService, SQLite stores, the HTTP API served
by uvicorn on 127.0.0.1) twice, interleaved:

- **off**: no metrics registry, tracing off;
- **on**: the Prometheus families fed by the job events and the core's observers, the job
  census, ``/metrics`` scraped every second over HTTP, and every job traced by an SDK
  TracerProvider exporting over OTLP/HTTP (batched, as ``airlock serve`` does) to a sink this
  benchmark starts on 127.0.0.1 (it counts what it receives).

While each batch runs, one client reads ``GET /api/v1/jobs/{id}`` and ``GET /api/v1/jobs``
in turn. Rows: jobs/min (target: on ≥ 0.95x off) and the API's p50 (target: on ≤ 1.05x off),
with p99 in the detail.

Usage: ``python bench/observability_overhead.py [--rounds 3] [--jobs 40]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, ServiceSettings, SqliteJobStore
from airlock.identity import Authenticator, RoleBook
from airlock.jobs import JobState
from airlock.observability import Metrics, metrics_app
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step
from airlock.tracing import JobTracing
from airlock.web import WebServer, create_app
from bench._common import pct
from bench._report import Report, RowSpec, floor_ratio, floor_ratio_at_least
from layer0 import TurnInput

TOKEN = "bench-observability-token"
CONCURRENCY = 4
#: How often the "on" configuration's /metrics is scraped, seconds.
SCRAPE_S = 1.0
KEYS = ("obs.throughput_off", "obs.throughput_on", "obs.api_off", "obs.api_on")


def row_specs(jobs: int) -> list[RowSpec]:
    """The rows of the main table (÷ floor: ÷ the same measure with both off)."""
    off_t, _, off_api, _ = KEYS
    each = f"{jobs} one-tool jobs, concurrency {CONCURRENCY}, process backend"
    return [
        RowSpec(off_t, f"controller, metrics and tracing off ({each})", "jobs/min"),
        RowSpec(
            KEYS[1],
            "  on: metrics scraped every 1 s, every job traced over OTLP/HTTP",
            "jobs/min",
            floor=off_t,
            targets=(floor_ratio_at_least(0.95),),
        ),
        RowSpec(off_api, "HTTP GET of a job and of the jobs list under that load, off"),
        RowSpec(KEYS[3], "  on", floor=off_api, targets=(floor_ratio(1.05),)),
    ]


# -- the OTLP sink ------------------------------------------------------------------------------


@dataclass
class Sink:
    """What the OTLP/HTTP sink received."""

    requests: int = 0
    bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextlib.contextmanager
def otlp_sink() -> Iterator[tuple[str, Sink]]:
    """An HTTP server on 127.0.0.1 answering every POST with 200 (an OTLP/HTTP collector's
    reply to an export); its traces endpoint and what it counted."""
    sink = Sink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with sink.lock:
                sink.requests += 1
                sink.bytes += len(body)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", sink
    finally:
        server.shutdown()
        server.server_close()


# -- one batch ------------------------------------------------------------------------------------


@dataclass
class Batch:
    """One batch: jobs/min, the API's latencies (ms), failures."""

    jobs_per_min: float
    api_ms: list[float]
    failed: list[str]


def write_config(tmp: Path) -> Path:
    agent = {
        "provider": {
            "kind": "scripted",
            "script": [tool_step("bash", {"command": "true"}), text_step("done")],
        },
        "tools": ["bash"],
        "backend": "process",
        "defaults": {"max_turns": 4, "max_duration": "60s"},
    }
    path = tmp / "airlock.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "agents": {"a": agent}}))
    return path


@contextlib.asynccontextmanager
async def controller(
    tmp: Path, on: bool, endpoint: str
) -> AsyncIterator[tuple[JobService, str, Metrics | None]]:
    """A started JobService with the HTTP API; metrics and tracing as ``on`` says."""
    config = load_config(write_config(tmp))
    tracing = JobTracing()
    if on:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tracing = JobTracing.to(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    metrics = Metrics() if on else None
    settings = ServiceSettings(concurrency=CONCURRENCY)
    with metrics.observing() if metrics is not None else contextlib.nullcontext():
        async with (
            SqliteJobStore(tmp / "jobs.db") as store,
            SqliteStore(tmp / "state.db") as state,
            JobService(store, AgentRunner(config), state, settings, tracing=tracing) as service,
        ):
            mounts = {}
            if metrics is not None:
                metrics.attach(service)
                mounts["/metrics"] = metrics_app(metrics)
            app = create_app(service, Authenticator(None, None, RoleBook({}), TOKEN), mounts=mounts)
            async with (
                metrics.census(service) if metrics is not None else contextlib.nullcontext(),
                WebServer(app, "127.0.0.1:0") as web,
            ):
                yield service, web.url, metrics
        tracing.shutdown()


async def _scrape(client: httpx.AsyncClient, stop: asyncio.Event) -> None:
    while not stop.is_set():
        response = await client.get("/metrics")
        response.raise_for_status()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SCRAPE_S)


async def _read(client: httpx.AsyncClient, job_id: str, stop: asyncio.Event, ms: list[float]) -> None:
    while not stop.is_set():
        for path in (f"/api/v1/jobs/{job_id}", "/api/v1/jobs?page_size=20"):
            start = time.perf_counter()
            response = await client.get(path)
            ms.append((time.perf_counter() - start) * 1000)
            response.raise_for_status()


async def batch(jobs: int, on: bool, endpoint: str) -> Batch:
    """``jobs`` jobs submitted at once to a fresh controller; the API read meanwhile."""
    with tempfile.TemporaryDirectory(prefix="al-bench-obs-") as where:
        async with controller(Path(where), on, endpoint) as (service, url, metrics):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
                stop, api_ms = asyncio.Event(), list[float]()
                start = time.perf_counter()
                submitted = [await service.submit("a", TurnInput.new(f"job {i}")) for i in range(jobs)]
                readers = [asyncio.create_task(_read(client, submitted[0].id, stop, api_ms))]
                if metrics is not None:
                    readers.append(asyncio.create_task(_scrape(client, stop)))
                done = await asyncio.gather(*(service.wait(j.id) for j in submitted))
                wall = time.perf_counter() - start
                stop.set()
                await asyncio.gather(*readers)
    failed = [f"{j.id}: {j.state.value}" for j in done if j.state is not JobState.SUCCEEDED]
    return Batch(jobs * 60 / wall, api_ms, failed)


async def measure(rounds: int, jobs: int) -> tuple[dict[str, list[Batch]], Sink]:
    """``rounds`` of (off, on), interleaved, after one warm-up batch of each."""
    found: dict[str, list[Batch]] = {"off": [], "on": []}
    with otlp_sink() as (endpoint, sink):
        for i in range(rounds + 1):
            for name in ("off", "on") if i % 2 == 0 else ("on", "off"):
                result = await batch(max(4, jobs // 4) if i == 0 else jobs, name == "on", endpoint)
                if i > 0:
                    found[name].append(result)
    return found, sink


def record(report: Report, found: dict[str, list[Batch]], sink: Sink) -> None:
    """Fill :func:`row_specs`' rows (jobs/min: the median of the rounds)."""
    for name in ("off", "on"):
        batches = found[name]
        failed = [f for b in batches for f in b.failed]
        rates = [b.jobs_per_min for b in batches]
        detail = f"{len(batches)} rounds, " + ", ".join(f"{r:.0f}" for r in rates) + " jobs/min"
        if name == "on":
            detail += f"; the sink got {sink.requests} exports, {sink.bytes / 1024:.0f} KiB"
        report.set(f"obs.throughput_{name}", statistics.median(rates) if rates else None, detail, failed)
        api = [ms for b in batches for ms in b.api_ms]
        if api:
            report.add(f"obs.api_{name}", *api)
            report.data[f"obs.api_{name}"].detail = f"{len(api)} requests, p99 {pct(api, 0.99):.1f} ms"


async def measure_rows(report: Report, rounds: int, jobs: int) -> None:
    """The rows for ``python -m bench``."""
    found, sink = await measure(rounds, jobs)
    record(report, found, sink)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=40)
    args = parser.parse_args()
    report = Report(row_specs(args.jobs))
    asyncio.run(measure_rows(report, args.rounds, args.jobs))
    print(report.table())
    return 1 if any(report.data[k].errors for k in KEYS) else 0


if __name__ == "__main__":
    raise SystemExit(main())

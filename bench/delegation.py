"""What a planner waits for when it delegates: three children whose tool takes 3 s each.

An in-process controller (real JobService over SQLite, process backend, scripted agents): a
planner whose one step delegates to three workers; each worker's one tool call runs
``sleep 3``. Rows (wall time of the planner's job, submitted to finished):

- **floor**: the same planner delegating to one worker (one child's turn, its sandbox, the
  controller's bookkeeping);
- **three at once**: the three delegates run concurrently (the default);
- **one at a time**: the same tree with ``parallel_children: 1``, as every tree ran before
  delegates ran concurrently.

Usage: ``python bench/delegation.py [--quick] [--markdown]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, ServiceSettings, SqliteJobStore
from airlock.jobs import JobState
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step, tools_step
from bench._report import Report, RowSpec, floor_ratio
from layer0 import TurnInput

#: The workers' tool call, and how many the planner delegates to.
TOOL_S = 3
WORKERS = ("north", "south", "east")
ONE = "delegation.one"
PARALLEL = "delegation.three"
SERIAL = "delegation.three_serial"


def row_specs() -> list[RowSpec]:
    """The rows (÷ floor: ÷ the tree with one child)."""
    tool = f"a {TOOL_S} s tool call each"
    return [
        RowSpec(ONE, f"planner delegating to 1 child ({tool}, process backend)", unit="s"),
        RowSpec(PARALLEL, "  to 3 children at once", unit="s", floor=ONE, targets=(floor_ratio(1.5),)),
        RowSpec(SERIAL, "  to 3 children, one at a time (parallel_children: 1)", unit="s", floor=ONE),
    ]


KEYS = tuple(spec.key for spec in row_specs())


def _agent(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


def _config(workers: tuple[str, ...]) -> dict[str, Any]:
    worker = [tool_step("bash", {"command": f"sleep {TOOL_S}"}), text_step("surveyed")]
    delegates = [("delegate", {"agent": w, "message": f"survey the {w}"}) for w in workers]
    planner = [tools_step(delegates), text_step("delegated")]
    return {
        "version": 1,
        "agents": {
            "planner": _agent(planner, ["delegate"], effects={"delegate": list(workers)}),
            **{w: _agent(worker, ["bash"]) for w in workers},
        },
    }


def _write_config(path: Path, workers: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_config(workers)))


@contextlib.asynccontextmanager
async def _service(root: Path, workers: tuple[str, ...], parallel: int) -> AsyncIterator[JobService]:
    path = root / "airlock.yaml"
    await asyncio.to_thread(_write_config, path, workers)
    settings = ServiceSettings(parallel_children=parallel)
    async with (
        SqliteJobStore(root / "jobs.db") as store,
        SqliteStore(root / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state, settings=settings) as service,
    ):
        yield service


async def tree_seconds(root: Path, workers: tuple[str, ...], parallel: int) -> float:
    """One planner job's wall time, submitted to finished (raises unless it succeeded)."""
    async with _service(root, workers, parallel) as service:
        start = time.perf_counter()
        job = await service.submit("planner", TurnInput.new("survey"))
        done = await service.wait(job.id)
        seconds = time.perf_counter() - start
    if done.state is not JobState.SUCCEEDED or len(done.children) != len(workers):
        raise RuntimeError(f"the planner's job ended {done.state.value}: {done.error}")
    return seconds


async def measure_rows(report: Report, rounds: int) -> None:
    """Every row, interleaved ``rounds`` times, for ``python -m bench`` or alone."""
    cases = ((ONE, WORKERS[:1], 4), (PARALLEL, WORKERS, 4), (SERIAL, WORKERS, 1))
    with tempfile.TemporaryDirectory(prefix="airlock-bench-delegation-") as tmp:
        for n in range(rounds):
            for key, workers, parallel in cases:
                try:
                    report.add(key, await tree_seconds(Path(tmp) / f"{key}-{n}", workers, parallel))
                except Exception as e:  # a failed case fails its row, not the others
                    report.fail(key, f"{type(e).__name__}: {e}")


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--quick", action="store_true", help="one round instead of three")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    report = Report(row_specs())
    asyncio.run(measure_rows(report, 1 if args.quick else 3))
    print(report.table(markdown=args.markdown))
    sys.exit(1 if report.failed() else 0)


if __name__ == "__main__":
    main()

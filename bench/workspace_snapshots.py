"""What workspace snapshots cost: per tool call, and on resume, in one run.

The workspace: 1,000 files of 52,428 random bytes (50 MiB; random, so zlib gains nothing: the
worst case for compression). Rows:

- **runner side** (in-process :class:`~airlock.runner._snapshot.Snapshotter` on a temporary
  directory): one snapshot after 1 and after 100 files changed (manifest scan + hashing of the
  changed files + compression + the events), a scan that finds nothing changed, and the first,
  full snapshot;
- **end to end** (an in-process controller, real JobService over SQLite, blobs in a
  DirBlobStore, process backend): jobs whose first tool call writes the workspace, then tool
  calls that each change 1 (or 100) files; a tool call's time is from its start to the next
  one's (tool + snapshot + the controller verifying and storing the blobs + checkpoint + the
  next model step). Floor: the same job with ``durability.workspace.snapshots: false``;
- **resume**: a turn started with the 50 MiB workspace restored (RestoreWorkspace RPC, blobs
  read from a DirBlobStore) until its first tool call starts, vs the same turn with an empty
  workspace (floor); process backend, and Docker when the runner image is there;
- **fork storage**: a job writes 10 MiB (200 random files), then one 1 KiB file; 100 forks
  of it at the first checkpoint each restore the 10 MiB and write their own 1 KiB file. The
  blob store's bytes after the forks ÷ after the job alone (floor): shared content is stored
  once, so the ratio stays near 1 (storing each fork's copy would make it ~101x).

Usage: ``python bench/workspace_snapshots.py [--quick] [--no-docker] [--markdown]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.controller._blobs import DirBlobStore
from airlock.jobs import JobState, SandboxActivity
from airlock.policy import EMPTY_MANIFEST, WorkspaceBlob, WorkspaceManifest, WorkspaceSnapshot, stored_blob
from airlock.runner._snapshot import Snapshotter
from airlock.sandbox import SandboxRequest, TurnHandle, WorkspaceRestore
from airlock.sandbox.process import ProcessBackend
from airlock.state import SqliteStore
from airlock.testing import bash_agent, text_step, tool_step
from airlock.turn import ToolStarted
from bench._report import Report, RowSpec, at_most, floor_ratio
from layer0 import EnvironmentSpec, ProcessIsolation, TurnInput

FILES = 1000
FILE_BYTES = 52_428  # x 1,000 = 50 MiB
TENANT = "bench"
#: Generates the workspace in a job's first tool call.
SEED_COMMAND = (
    "mkdir -p d && python3 -c 'import os\nfor i in range(1000, 2000):"
    f' open(f"d/f{{i}}", "wb").write(os.urandom({FILE_BYTES}))\''
)
PROCESS_ENV = EnvironmentSpec(isolation=[ProcessIsolation()])
CHANGES = (1, 100)
OFF, SCAN = "workspace.call_off", "workspace.scan"
STORED = "workspace.stored"
#: The forked job: 10 MiB in 200 random files, then a 1 KiB file of its own.
FORKED_STEPS = [
    tool_step(
        "bash",
        {"command": "mkdir -p d && for i in $(seq 1 200); do head -c 52428 /dev/urandom > d/f$i; done"},
        id="seed",
    ),
    tool_step("bash", {"command": "head -c 1024 /dev/urandom > mine"}, id="mine"),
    text_step("done"),
]


@dataclass(frozen=True)
class Settings:
    """How much to measure (``--quick``: a short run that only fails when a row fails)."""

    scans: int
    calls: int
    rounds: int
    resumes: int
    docker: bool
    #: Untimed turns of each resume case first (first-call paths, page cache).
    warmup: int = 1

    #: Forks of one job in the storage rows.
    forks: int = 100

    @classmethod
    def of(cls, quick: bool, docker: bool = True) -> Settings:
        return cls(3, 3, 1, 1, False, warmup=0, forks=10) if quick else cls(10, 10, 2, 5, docker)


def row_specs() -> list[RowSpec]:
    """The rows (÷ floor: ÷ the same measure with snapshots off, or with an empty workspace)."""
    rows = [RowSpec(f"{SCAN}_none", "runner: snapshot scan, nothing changed (stat walk of 1,000 files)")]
    for n in CHANGES:
        rows.append(
            RowSpec(
                f"{SCAN}_{n}",
                f"runner: snapshot, {n} file(s) changed (scan+hash+zlib)",
                floor=f"{OFF}_{n}",
                targets=(at_most(20),) if n == 1 else (),
            )
        )
    rows.append(RowSpec(f"{SCAN}_full", "runner: first snapshot of the 50 MiB workspace"))
    for n in CHANGES:
        each = f"tool call changing {n} file(s) of 1,000 / 50 MiB"
        rows.append(RowSpec(f"{OFF}_{n}", f"e2e {each}, snapshots off (process)"))
        rows.append(RowSpec(f"workspace.call_on_{n}", "  snapshots on (blobs stored)", floor=f"{OFF}_{n}"))
    for backend in ("process", "docker"):
        empty = f"workspace.resume_empty_{backend}"
        rows.append(RowSpec(empty, f"resume with an empty workspace → first tool call ({backend})"))
        rows.append(RowSpec(f"workspace.resume_50_{backend}", "  50 MiB restored", floor=empty))
    rows.append(RowSpec(STORED, "storage: a job's workspace, 10 MiB (blob store)", unit="MiB"))
    rows.append(
        RowSpec(
            f"{STORED}_forks",
            "  + forks of it, each restored and writing its own 1 KiB file",
            unit="MiB",
            floor=STORED,
            targets=(floor_ratio(1.1),),
        )
    )
    return rows


KEYS = tuple(spec.key for spec in row_specs())


# -- the workspace ------------------------------------------------------------------------


def _write(path: Path) -> None:
    path.write_bytes(os.urandom(FILE_BYTES))


def seed_workspace(root: Path) -> list[Path]:
    """1,000 files of random bytes under ``root/d``; their paths."""
    (root / "d").mkdir(parents=True, exist_ok=True)
    paths = [root / "d" / f"f{1000 + i}" for i in range(FILES)]
    for path in paths:
        _write(path)
    return paths


def timed_scan(snapshotter: Snapshotter) -> tuple[float, list[Any]]:
    """One snapshot (every event built): milliseconds, the events."""
    start = time.perf_counter()
    events = list(snapshotter.scan())
    return (time.perf_counter() - start) * 1000, events


def runner_side(report: Report, scans: int) -> None:
    """The runner-side rows: a Snapshotter on a temporary 50 MiB workspace."""
    with tempfile.TemporaryDirectory(prefix="al-bench-ws-") as where:
        root = Path(where)
        paths = seed_workspace(root)
        snapshotter = Snapshotter(root, max_bytes=0)
        full, _ = timed_scan(snapshotter)
        report.add(f"{SCAN}_full", full)
        report.data[f"{SCAN}_full"].detail = "once"
        for i in range(scans):
            report.add(f"{SCAN}_none", timed_scan(snapshotter)[0])
            for n in CHANGES:
                for path in paths[i * n % FILES :][:n]:
                    _write(path)
                ms, events = timed_scan(snapshotter)
                blobs = {e.sha256 for e in events if isinstance(e, WorkspaceBlob)}
                if len(blobs) != n:
                    report.fail(f"{SCAN}_{n}", f"{len(blobs)} blobs sent for {n} changed files")
                report.add(f"{SCAN}_{n}", ms)


async def workspace_blobs(root: Path, store: DirBlobStore) -> WorkspaceManifest:
    """Snapshot ``root`` into ``store``; its manifest (what a resumed job restores)."""
    events = await asyncio.to_thread(lambda: list(Snapshotter(root).scan()))
    manifest, data, how = EMPTY_MANIFEST, dict[str, bytes](), dict[str, Any]()
    for e in events:
        if isinstance(e, WorkspaceBlob):
            data[e.sha256] = data.get(e.sha256, b"") + e.data
            how[e.sha256] = e.compression
        elif isinstance(e, WorkspaceSnapshot):
            manifest = manifest.apply(e.changed, e.deleted)
    for sha, blob in data.items():
        await store.put(TENANT, sha, stored_blob(how[sha], blob))
    return manifest


# -- end to end: tool calls through a controller -------------------------------------------------


def change_command(n: int, call: int) -> str:
    first = 1000 + call * n % FILES
    return f"for i in $(seq {first} {first + n - 1}); do head -c {FILE_BYTES} /dev/urandom > d/f$i; done"


def write_config(tmp: Path, calls: int) -> Path:
    """Agents ``on`` / ``off``: seed, then for each N in :data:`CHANGES` ``calls`` tool calls
    changing N files (ids ``N-i``), then one ``true``."""
    steps = [tool_step("bash", {"command": SEED_COMMAND}, id="seed")]
    for n in CHANGES:
        steps += [tool_step("bash", {"command": change_command(n, c)}, id=f"{n}-{c}") for c in range(calls)]
    steps += [tool_step("bash", {"command": "true"}, id="end"), text_step("done")]
    agents = {
        name: {
            "provider": {"kind": "scripted", "script": steps},
            "tools": ["bash"],
            "backend": "process",
            "defaults": {"max_turns": len(steps) + 2, "max_duration": "600s"},
            "durability": {"workspace": {"snapshots": name == "on", "max_bytes": "200Mi"}},
        }
        for name in ("on", "off")
    }
    path = tmp / "airlock.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "agents": agents}))
    return path


@contextlib.asynccontextmanager
async def controller(tmp: Path, calls: int) -> AsyncIterator[JobService]:
    """A started JobService keeping workspace blobs in ``tmp/blobs``."""
    config = load_config(write_config(tmp, calls))
    async with (
        SqliteJobStore(tmp / "jobs.db") as store,
        SqliteStore(tmp / "state.db") as state,
        JobService(store, AgentRunner(config), state, blobs=DirBlobStore(tmp / "blobs")) as service,
    ):
        yield service


async def call_times(service: JobService, agent: str) -> dict[int, list[float]]:
    """One job of ``agent``: per N, milliseconds from each call changing N files to the next
    call's start."""
    job = await service.submit(agent, TurnInput.new("go"))
    done = await service.wait(job.id)
    if done.state is not JobState.SUCCEEDED:
        raise RuntimeError(f"{agent}: {done.state.value}: {done.error}")
    starts = {
        e.data.event.tool_use_id: e.time
        for e in await service.store.events(job.id, kind="sandbox")
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolStarted)
    }
    order = [k for k in starts if k != "seed"]
    found: dict[int, list[float]] = {n: [] for n in CHANGES}
    for a, b in pairwise(order):
        found[int(a.split("-")[0])].append((starts[b] - starts[a]).total_seconds() * 1000)
    return found


async def end_to_end(report: Report, calls: int, rounds: int) -> None:
    """Jobs with snapshots on and off, interleaved (the order flips each round)."""
    with tempfile.TemporaryDirectory(prefix="al-bench-ws-e2e-") as where:
        async with controller(Path(where), calls) as service:
            for r in range(rounds):
                for agent in ("on", "off") if r % 2 else ("off", "on"):
                    try:
                        found = await call_times(service, agent)
                    except Exception as e:
                        for n in CHANGES:
                            report.fail(
                                f"workspace.call_{agent}_{n}", f"{type(e).__name__}: {e}".splitlines()[0]
                            )
                        continue
                    for n, times in found.items():
                        report.add(f"workspace.call_{agent}_{n}", *times)


# -- resume ---------------------------------------------------------------------------------------


async def first_call_ms(backend: Any, env: EnvironmentSpec, restore: WorkspaceRestore | None) -> float:
    """A turn (restored from ``restore``, or empty): milliseconds until its first tool starts."""
    start, first = time.perf_counter(), list[float]()

    async def sink(event: Any) -> None:
        if getattr(event, "type", "") == "tool_started" and not first:
            first.append(time.perf_counter() - start)

    handle = TurnHandle(restore=restore, snapshot_bytes=200 * 2**20)
    request = SandboxRequest.compile(bash_agent("true"), TurnInput.new("go"), env, handle=handle)
    await backend.run(request.model_copy(update={"events": sink}))
    if not first:
        raise RuntimeError("the turn never started a tool")
    return first[0] * 1000


async def resume_rows(report: Report, backend: Any, env: EnvironmentSpec, name: str, s: Settings) -> None:
    """The resume rows of one backend: empty vs 50 MiB restored, interleaved after a warm-up."""
    with tempfile.TemporaryDirectory(prefix="al-bench-ws-resume-") as where:
        root = Path(where)
        await asyncio.to_thread(seed_workspace, root / "ws")
        store = DirBlobStore(root / "blobs")
        manifest = await workspace_blobs(root / "ws", store)

        async def read(sha: str) -> bytes:
            return await store.get(TENANT, sha)

        restore = WorkspaceRestore(manifest, read)
        cases = {f"workspace.resume_empty_{name}": None, f"workspace.resume_50_{name}": restore}
        for i in range(s.warmup + s.resumes):
            for key, case in cases.items() if i % 2 else reversed(cases.items()):
                try:
                    ms = await first_call_ms(backend, env, case)
                except Exception as e:
                    report.fail(key, f"{type(e).__name__}: {e}".splitlines()[0])
                    continue
                if i >= s.warmup:
                    report.add(key, ms)
        report.data[
            f"workspace.resume_50_{name}"
        ].detail = f"{manifest.files} files, {manifest.total_bytes} B"


def docker_backend() -> tuple[Any, str | None]:
    """The Docker backend on the runner image, or None and why not."""
    try:
        from airlock.images import docker_client, require_image, runner_image_tag
        from airlock.sandbox.docker import DockerBackend

        image = runner_image_tag()
        require_image(docker_client(), image)
        return DockerBackend(image=image), None
    except Exception as e:
        return None, f"n/a: {type(e).__name__}: {e}".splitlines()[0][:120]


async def _stage(report: Report, prefix: str, run: Awaitable[None]) -> None:
    """Run one stage; a failure is recorded on its rows (``prefix``), never raised."""
    start = time.perf_counter()
    try:
        await run
    except Exception as e:
        error = f"{type(e).__name__}: {e}".splitlines()[0]
        for key in KEYS:
            if key.startswith(prefix) and not report.data[key].na:
                report.fail(key, error)
    print(f"[workspace bench] {prefix}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


async def measure_rows(report: Report, s: Settings) -> None:
    """Every row, for ``python -m bench`` or alone."""
    await _stage(report, SCAN, asyncio.to_thread(runner_side, report, s.scans))
    await _stage(report, "workspace.call", end_to_end(report, s.calls, s.rounds))
    process = resume_rows(report, ProcessBackend(), PROCESS_ENV, "process", s)
    await _stage(report, "workspace.resume_", process)
    await _stage(report, STORED, fork_storage(report, s.forks))
    backend, why = await asyncio.to_thread(docker_backend) if s.docker else (None, "skipped (--quick)")
    if backend is None:
        for key in ("workspace.resume_empty_docker", "workspace.resume_50_docker"):
            report.na(key, why or "n/a")
        return
    docker = resume_rows(report, backend, EnvironmentSpec(), "docker", s)
    await _stage(report, "workspace.resume_", docker)


async def fork_storage(report: Report, forks: int) -> None:
    """The blob store's bytes after one job, then after ``forks`` forks of it (see the module
    docstring)."""
    agent = {
        "provider": {"kind": "scripted", "script": FORKED_STEPS},
        "tools": ["bash"],
        "backend": "process",
        "defaults": {"max_turns": 6, "max_duration": "300s"},
    }
    with tempfile.TemporaryDirectory(prefix="al-bench-ws-forks-") as where:
        tmp = Path(where)
        (tmp / "airlock.yaml").write_text(yaml.safe_dump({"version": 1, "agents": {"forked": agent}}))
        config = load_config(tmp / "airlock.yaml")
        async with (
            SqliteJobStore(tmp / "jobs.db") as store,
            SqliteStore(tmp / "state.db") as state,
            JobService(store, AgentRunner(config), state, blobs=DirBlobStore(tmp / "blobs")) as service,
        ):
            job = await _finished(service, (await service.submit("forked", TurnInput.new("go"))).id)
            report.add(STORED, await asyncio.to_thread(_mib, tmp / "blobs"))
            _, records = await service.weave(job)
            seeded = next(r.id for r in records if r.kind == "tool_call" and _call_id(r.content) == "seed")
            made = [await service.fork(job, at=seeded) for _ in range(forks)]
            for fork in made:
                await _finished(service, fork.id)
            stored = await asyncio.to_thread(_mib, tmp / "blobs")
            report.add(f"{STORED}_forks", stored)
            report.data[f"{STORED}_forks"].detail = f"{forks} forks; each copy stored: ~{forks + 1}x"


async def _finished(service: JobService, job_id: str) -> str:
    done = await service.wait(job_id)
    if done.state is not JobState.SUCCEEDED:
        raise RuntimeError(f"job {job_id}: {done.state.value}: {done.error}")
    return job_id


def _call_id(content: object) -> object:
    return content.get("tool_use_id") if isinstance(content, dict) else None


def _mib(root: Path) -> float:
    """The bytes of every file below ``root``, in MiB."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / (1 << 20)


def summary(report: Report) -> str:
    """The ratios of the rows that have a floor, one line each."""
    lines = []
    for key, spec in report.specs.items():
        ratio = report.ratio(key, spec.floor) if spec.floor else None
        if ratio is not None:
            lines.append(f"{key}: {ratio:.2f}x {spec.floor}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (no Docker rows)")
    parser.add_argument("--no-docker", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    report = Report(row_specs())
    asyncio.run(measure_rows(report, Settings.of(args.quick, not args.no_docker)))
    print(report.table(markdown=args.markdown))
    print(summary(report))
    return 1 if report.failed() else 0


if __name__ == "__main__":
    raise SystemExit(main())

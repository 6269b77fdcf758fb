"""An in-process controller and the configuration files its tests write."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from airlock.config import load_config
from airlock.controller import (
    AgentRunner,
    Controller,
    ControllerOptions,
    JobService,
    ServiceSettings,
    SqliteJobStore,
)
from airlock.controller._blobs import DirBlobStore
from airlock.jobs import ControllerClient, JobEvent, SandboxActivity
from airlock.state import SqliteStore
from airlock.turn import ToolFinished

#: A controller in a process of its own (``python -c SERVE_SCRIPT CONFIG DATA_DIR SANDBOX_DIR
#: IMAGE``): prints its address and token, then serves until killed (tests kill it with -9).
SERVE_SCRIPT = """
import asyncio, sys
from pathlib import Path
from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions, ServiceSettings

async def main() -> None:
    options = ControllerOptions(
        data_dir=Path(sys.argv[2]), address="127.0.0.1:0", settings=ServiceSettings(concurrency=1),
        sandbox_dir=Path(sys.argv[3]), image=sys.argv[4],
    )
    async with Controller(load_config(Path(sys.argv[1])), options) as controller:
        print(controller.address, controller.token, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def controller_process(
    config: Path, data_dir: Path, sandbox_dir: Path, image: str
) -> AsyncIterator[tuple[subprocess.Popen[str], ControllerClient]]:
    """A controller in a process of its own (:data:`SERVE_SCRIPT`) and a client of it; the
    process is killed on the way out if the test has not killed it."""
    proc = subprocess.Popen(  # noqa: ASYNC220 - tests kill it with SIGKILL; asyncio's would reap it
        [sys.executable, "-c", SERVE_SCRIPT, str(config), str(data_dir), str(sandbox_dir), image],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        address, token = (await asyncio.to_thread(proc.stdout.readline)).split()
        async with ControllerClient(address, token) as client:
            yield proc, client
    finally:
        if proc.poll() is None:
            proc.kill()


def agent_config(steps: Sequence[Mapping[str, Any]], tools: Sequence[str], **sandbox: Any) -> dict[str, Any]:
    """A configuration file's docker agent on the scripted provider playing ``steps``
    (1 CPU, 256 MiB, 6 turns, 60 s unless ``sandbox`` says otherwise)."""
    return {
        "provider": {"kind": "scripted", "script": [dict(s) for s in steps]},
        "system": "test agent",
        "tools": list(tools),
        "backend": "docker",
        "resources": sandbox.pop("resources", {"cpu": "1", "memory": "256Mi"}),
        "defaults": sandbox.pop("defaults", {"max_turns": 6, "max_duration": "60s"}),
        **sandbox,
    }


def write_config(
    directory: Path,
    agents: dict[str, dict[str, Any]],
    backends: dict[str, Any] | None = None,
    pool: dict[str, Any] | None = None,
) -> Path:
    """An airlock.yaml (JSON is YAML) defining ``agents`` (and ``backends`` and ``pool`` settings)."""
    path = directory / "airlock.yaml"
    config: dict[str, Any] = {"version": 1, "agents": agents}
    if backends:
        config["backends"] = backends
    if pool:
        config["pool"] = pool
    path.write_text(json.dumps(config, indent=2))
    return path


@contextlib.asynccontextmanager
async def running_controller(
    config: Path,
    data_dir: Path,
    sandbox_dir: Path,
    image: str,
    **settings: Any,
) -> AsyncIterator[tuple[Controller, ControllerClient]]:
    """A Controller on a free loopback port and a client holding its token."""
    options = ControllerOptions(
        data_dir=data_dir,
        address="127.0.0.1:0",
        settings=ServiceSettings(**settings),
        sandbox_dir=sandbox_dir,
        image=image,
    )
    async with Controller(load_config(config), options) as controller:
        client = ControllerClient(controller.address, controller.token)
        try:
            yield controller, client
        finally:
            await client.close()


@contextlib.asynccontextmanager
async def running_service(
    config: Path,
    data_dir: Path,
    sandbox_dir: Path,
    image: str,
    runner: type[AgentRunner] = AgentRunner,
    *,
    workspaces: bool = False,
) -> AsyncIterator[JobService]:
    """A JobService (no gRPC server) over SQLite stores in ``data_dir``, running turns with
    ``runner`` (an AgentRunner subclass, e.g. one that tampers with what a sandbox returns);
    with ``workspaces``, jobs' workspace snapshots are kept in ``data_dir/blobs`` (as
    ``airlock serve`` keeps them by default)."""
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    async with (
        SqliteJobStore(data_dir / "jobs.db") as store,
        SqliteStore(data_dir / "state.db") as state,
    ):
        turns = runner(load_config(config), state_dir=sandbox_dir, image=image)
        blobs = DirBlobStore(data_dir / "blobs") if workspaces else None
        async with JobService(store, turns, state, blobs=blobs) as service:
            yield service


def tool_outputs(events: Sequence[JobEvent], name: str = "bash") -> list[str]:
    """What the finished ``name`` tool calls among a job's events printed (bash: stdout)."""
    outputs = [
        e.data.event.output
        for e in events
        if isinstance(e.data, SandboxActivity)
        and isinstance(e.data.event, ToolFinished)
        and e.data.event.name == name
    ]
    return [json.loads(o)["stdout"] if name == "bash" else o for o in outputs]

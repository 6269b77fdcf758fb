"""A long-lived sandbox on the process backend: one runner process for several jobs."""

from __future__ import annotations

import os
import signal

import pytest

from airlock.policy import WorkspaceBlob, WorkspaceSnapshot
from airlock.runner import RemoteTurn
from airlock.sandbox import LongLivedSandbox, SandboxBusy
from airlock.sandbox.process import ProcessBackend
from airlock.turn import ToolFinished
from layer0 import EnvError, EnvironmentSpec, ProcessIsolation, TurnInput
from tests.support.sessions import session_request, three_jobs_share_the_box

pytestmark = pytest.mark.timeout(120)
PROCESS = EnvironmentSpec(isolation=[ProcessIsolation()])


async def test_three_jobs_share_one_runner_and_its_workspace_and_close_leaves_nothing() -> None:
    backend = ProcessBackend()
    assert isinstance(backend, LongLivedSandbox)
    session = await backend.open(session_request(PROCESS), label="sbx-one")
    runner = session.instance
    try:
        assert runner.proc is not None
        assert await three_jobs_share_the_box(session) == runner.proc.pid
        assert runner.proc.returncode is None
    finally:
        await session.close()
    assert runner.proc.returncode is not None
    assert runner.base is not None and not runner.base.exists()
    assert not await session.alive()
    with pytest.raises(EnvError):
        await session.run(TurnInput.new("after close"))


async def test_a_lost_runner_is_reported_as_an_env_error_and_torn_down() -> None:
    session = await ProcessBackend().open(session_request(PROCESS), label="sbx-lost")
    runner = session.instance
    try:
        assert runner.proc is not None
        os.killpg(runner.proc.pid, signal.SIGKILL)
        await runner.proc.wait()
        with pytest.raises(EnvError) as lost:
            await session.run(TurnInput.new("job"))
        assert lost.value.kind == "other"
        assert "lost" in str(lost.value)
        assert session.lost is not None
        assert runner.base is not None and not runner.base.exists()
        with pytest.raises(EnvError, match="re-open"):
            await session.run(TurnInput.new("again"))
    finally:
        await session.close()


async def test_a_snapshot_while_a_job_runs_is_refused() -> None:
    session = await ProcessBackend().open(session_request(PROCESS), label="sbx-busy-snap")
    refused: list[BaseException] = []

    async def sink(event: object) -> None:
        if isinstance(event, ToolFinished) and not refused:
            with pytest.raises(SandboxBusy) as busy:
                async for _ in session.snapshot(1 << 20):
                    pass
            refused.append(busy.value)

    try:
        await session.run(TurnInput.new("job"), sink)
        assert len(refused) == 1
    finally:
        await session.close()


@pytest.mark.skipif(
    not hasattr(RemoteTurn, "snapshot_workspace"),
    reason="RemoteTurn.snapshot_workspace (ws-runner) not landed yet",
)
async def test_a_snapshot_of_the_idle_box_names_what_its_jobs_wrote() -> None:
    session = await ProcessBackend().open(session_request(PROCESS), label="sbx-snap")
    try:
        await session.run(TurnInput.new("job"))
        events = [e async for e in session.snapshot(1 << 20)]
        [snapshot] = [e for e in events if isinstance(e, WorkspaceSnapshot)]
        assert "notes.txt" in {entry.path for entry in snapshot.changed}
        assert {b.sha256 for b in events if isinstance(b, WorkspaceBlob)} >= {
            entry.sha256 for entry in snapshot.changed
        }
        assert await session.alive()  # the box stays for the next job
    finally:
        await session.close()

"""``airlock serve``'s path for the offline demo agent: the controller starts the managed
local model on first use, the job's model calls go through the sandbox's credential proxy,
and the server is stopped when the controller stops. The REAL 1.5B model answers, so only
the mechanics are asserted, never the arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.jobs import JobState, SandboxActivity
from airlock.localmodel._manager import _pid_alive
from airlock.proxy import CredentialProxyEvent
from tests.support.controller import running_controller

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "airlock.yaml"


async def test_the_controller_runs_the_demo_agent_on_the_local_model(
    tmp_path: Path, state_dir: Path, runner_image: str
) -> None:
    async with running_controller(EXAMPLE, tmp_path / "data", state_dir, runner_image) as (
        controller,
        client,
    ):
        job = await client.wait((await client.submit("demo", "What is 17 * 23? Use the calculator.")).id)
        # Complete, or out of turns/time on a small model: the machinery worked either way.
        assert job.state is JobState.SUCCEEDED, job.error
        assert job.output is not None and job.output.metadata.tokens_in > 0
        events = [e async for e in client.watch(job.id)]
        server = controller.service.runner._local_model  # type: ignore[union-attr]
        assert server is not None and server.info is not None
        origin = server.info.base_url.removesuffix("/v1")
        calls = [
            e.data.event
            for e in events
            if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, CredentialProxyEvent)
        ]
        assert calls and all(c.upstream == origin and c.status == 200 for c in calls)
        assert all(c.credential == "local-model-key" for c in calls)
        started_here, pid = server.started_here, server.info.pid
    if started_here:
        assert not _pid_alive(pid)  # stopped with the controller

"""``PruneJobs`` end to end through ``Controller`` (real gRPC, the data dir's stores): an
administrator removes finished jobs (a dry run first counts them), with their turn records;
anyone else is refused; each call is audited; ``airlock jobs prune`` shows the counts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from airlock.cli import app
from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions, _execute
from airlock.jobs import ControllerClient, ControllerError


@pytest.fixture(autouse=True)
def no_reap(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_reap(self: Any) -> list[str]:  # recovery must not touch this machine's Docker
        return []

    monkeypatch.setattr(_execute.AgentRunner, "reap", no_reap)


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[Controller]:
    (tmp_path / "s.yaml").write_text("steps:\n  - say: done\n")
    agent = {"provider": {"kind": "scripted", "script": "s.yaml"}, "backend": "process"}
    path = tmp_path / "airlock.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "agents": {"a": agent}}))
    options = ControllerOptions(data_dir=tmp_path / "data", address="127.0.0.1:0")
    async with Controller(load_config(path), options) as started:
        yield started


async def test_an_administrator_prunes_finished_jobs_and_others_may_not(controller: Controller) -> None:
    async with ControllerClient(controller.address, controller.token) as admin:
        done = await admin.wait((await admin.submit("a", "hi")).id)
        assert done.state.terminal
        assert (await admin.prune(older_than_s=3600)).jobs == 0  # finished just now: not due
        assert await controller.service.weaves.store.count(done.id) > 0

        dry = await admin.prune(older_than_s=0.001, dry_run=True)
        assert (dry.trees, dry.jobs, dry.dry_run) == (1, 1, True) and dry.events > 0
        assert (await admin.get(done.id)).id == done.id

        _, secret = await admin.create_key("sam", "default", ["submitter"])
        async with ControllerClient(controller.address, secret) as sam:
            with pytest.raises(ControllerError) as denied:
                await sam.prune(older_than_s=0.001)
            assert denied.value.code == "PERMISSION_DENIED"

        removed = await admin.prune(older_than_s=0.001)
        assert (removed.trees, removed.jobs, removed.events, removed.dry_run) == (1, 1, dry.events, False)
        with pytest.raises(ControllerError) as gone:
            await admin.get(done.id)
        assert gone.value.code == "NOT_FOUND"
        assert await controller.service.weaves.store.count(done.id) == 0
        with pytest.raises(ControllerError) as bad:
            await admin.prune(older_than_s=0)
        assert bad.value.code == "INVALID_ARGUMENT"

        audited = await admin.audit(action="PruneJobs")
        assert [e.outcome for e in audited] == ["INVALID_ARGUMENT", "OK", "PERMISSION_DENIED", "OK", "OK"]
        assert "1 jobs" in audited[1].detail


async def test_the_cli_shows_what_a_prune_removed(controller: Controller) -> None:
    async with ControllerClient(controller.address, controller.token) as admin:
        await admin.wait((await admin.submit("a", "hi")).id)
    args = ["jobs", "prune", "--address", controller.address, "--token", controller.token]
    runner = CliRunner()
    dry = await asyncio.to_thread(runner.invoke, app, [*args, "--older-than", "1s", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would remove" in dry.output and "job trees" in dry.output
    await asyncio.sleep(1.1)  # the job must have finished over a second ago
    done = await asyncio.to_thread(runner.invoke, app, [*args, "--older-than", "1s", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["jobs"] == 1
    bad = await asyncio.to_thread(runner.invoke, app, [*args, "--older-than", "soon"])
    assert bad.exit_code == 2 and "--older-than 'soon'" in bad.output

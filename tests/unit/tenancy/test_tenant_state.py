"""Each tenant's memory and sessions are its own: a job of tenant blue continuing a session id
tenant red used reads none of red's history or memory (real runner on the process backend,
real SQLite state store), and the default tenant's state stays where it always was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore, TenantState, tenant_state
from airlock.jobs import JobState
from airlock.spec import HISTORY_KEY
from airlock.state import InMemoryStore, SqliteStore
from layer0 import Scope, TurnInput
from tests.unit.controller.test_memory_across_jobs import CONFIG, FAVOURITE, SESSION

pytestmark = pytest.mark.timeout(120)


async def test_a_session_id_of_another_tenant_starts_a_new_conversation(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state) as service,
    ):
        red = await service.submit(
            "writer", TurnInput.new("remember", session=SESSION), tenant="red", owner="a"
        )
        assert (await service.wait(red.id)).state is JobState.SUCCEEDED
        red_state = TenantState(state, "red")
        assert await red_state.read(Scope.session(SESSION), "favourite") == FAVOURITE
        assert await state.read(Scope.session(SESSION), "favourite") is None  # not the default tenant's

        blue = await service.submit(
            "reader", TurnInput.new("what is my favourite colour?", session=SESSION), tenant="blue", owner="b"
        )
        assert (await service.wait(blue.id)).state is JobState.SUCCEEDED
        history = await TenantState(state, "blue").read(Scope.session(SESSION), HISTORY_KEY)
        assert isinstance(history, list) and len(history) == 4  # its own messages only, no red ones
        first_user = history[0]["content"]
        assert [p["text"] for p in first_user if p["type"] == "text"] == ["what is my favourite colour?"]
        assert len(await red_state.read(Scope.session(SESSION), HISTORY_KEY)) == 4  # red's untouched


async def test_the_default_tenant_keeps_the_stores_own_scopes() -> None:
    inner = InMemoryStore()
    assert tenant_state(inner, "default") is inner
    red, blue = tenant_state(inner, "red"), tenant_state(inner, "blue")
    await red.write(Scope.global_(), "k", 1)
    await blue.write(Scope.global_(), "k", 2)
    assert (await red.read(Scope.global_(), "k"), await blue.read(Scope.global_(), "k")) == (1, 2)
    assert await inner.read(Scope.global_(), "k") is None
    assert await red.list(Scope.global_(), "") == ["k"]
    await red.delete(Scope.global_(), "k")
    assert await red.read(Scope.global_(), "k") is None and await blue.read(Scope.global_(), "k") == 2

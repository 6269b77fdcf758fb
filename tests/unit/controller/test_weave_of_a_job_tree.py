"""The weave of a delegated job tree, end to end on the process backend: Lamport order across
agents, independent children, the causal cone a child receives, and tamper detection."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import JobState, SandboxActivity
from airlock.state import SqliteStore
from airlock.testing import text_step, tools_step
from airlock.turn import ContextCompacted, SessionState
from airlock.weave import RecordType, Weave, WeaveStore
from layer0 import TurnInput

pytestmark = pytest.mark.timeout(120)

KEY = b"s" * 32


def scripted(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        "lead": scripted(
            [
                tools_step(
                    [
                        ("bash", {"command": "echo plan"}),
                        ("delegate", {"agent": "left", "message": "do the left half"}),
                        ("delegate", {"agent": "right", "message": "do the right half"}),
                    ]
                ),
                text_step("both halves delegated"),
            ],
            ["bash", "delegate"],
            effects={"delegate": ["left", "right"]},
        ),
        "left": scripted([text_step("left done")], [], context={"strategy": "causal_cone"}),
        "right": scripted([text_step("right done")], [], context={"strategy": "causal_cone"}),
    },
}


@contextlib.asynccontextmanager
async def service_of(tmp_path: Path) -> AsyncIterator[JobService]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state, audit_key=KEY) as service,
    ):
        yield service


def topological(weave: Weave, prefer: str) -> list[str]:
    """A topological order of the weave that runs ``prefer``'s records as early as it can."""
    braid = weave.braid()
    done: list[str] = []
    left = [r.id for r in weave.records]
    agent = {r.id: r.agent for r in weave.records}
    while left:
        ready = [i for i in left if braid[i] <= set(done)]
        pick = next((i for i in ready if agent[i] == prefer), ready[0])
        done.append(pick)
        left.remove(pick)
    return done


async def test_a_delegated_tree_is_one_weave_in_causal_order(tmp_path: Path) -> None:
    async with service_of(tmp_path) as service:
        job = await service.submit("lead", TurnInput.new("split the work"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        left_id, _ = done.children
        root, records = await service.weave(left_id)
        assert root == job.id
        weave = Weave(records, key=KEY)
        by_id = {r.id: r for r in records}
        # Lamport: every record's clock exceeds those of everything it depends on
        for record in records:
            for dep in weave.dependencies(record.id):
                assert by_id[dep].clock < record.clock
        left, right = weave.thread("left"), weave.thread("right")
        assert left[0].kind == right[0].kind == "input"
        # each child's input depends on the lead's records up to the delegation
        lead_tip_at_dispatch = left[0].depends_on[0]
        assert by_id[lead_tip_at_dispatch].agent == "lead"
        # the two children are independent: their records commute
        assert weave.independent(left[-1].id, right[-1].id)
        order = [r.id for r in weave.linearize()]
        right_first = topological(weave, prefer="right")
        assert right_first != order and weave.equivalent(order, right_first)
        # the cone of the right child holds the lead's past but nothing of the left child
        cone = {r.id for r in weave.cone("right")}
        assert not cone & {r.id for r in left}
        assert any(by_id[c].agent == "lead" and by_id[c].kind == "tool_call" for c in cone)
        types = {r.type for r in records}
        assert {RecordType.SPEECH, RecordType.ACTION} <= types
        _, report = await service.verify(job.id)
        assert report.ok and report.records == len(records)


async def test_a_causal_cone_child_sees_its_past_only_and_reports_the_compression(tmp_path: Path) -> None:
    async with service_of(tmp_path) as service:
        job = await service.submit("lead", TurnInput.new("split the work"))
        done = await service.wait(job.id)
        _, right_id = done.children
        saved = await service.store.checkpoint(right_id)
        assert saved is not None
        first = SessionState.model_validate_json(saved[0]).messages[0]
        context = first.content[0].text  # type: ignore[union-attr]
        assert context.startswith("Context: the ")
        assert "[lead] SPEECH input: split the work" in context
        assert "echo plan" in context
        assert "left done" not in context and "[left]" not in context, context
        compacted = [
            e.data.event
            for e in await service.store.events(right_id, kind="sandbox")
            if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ContextCompacted)
        ]
        assert len(compacted) == 1
        event = compacted[0]
        assert (
            event.strategy == "causal_cone" and event.cone_size is not None and event.cone_total is not None
        )
        assert event.cone_size < event.cone_total
        assert event.compression_ratio == pytest.approx(1 - event.cone_size / event.cone_total)


async def test_verify_names_a_record_tampered_with_in_the_store(tmp_path: Path) -> None:
    async with service_of(tmp_path) as service:
        job = await service.submit("lead", TurnInput.new("split the work"))
        await service.wait(job.id)
        store = WeaveStore(service.state)
        scope = WeaveStore.scope(job.id)
        keys = await service.state.list(scope, "")
        value = await service.state.read(scope, keys[2])
        value["content"] = {"forged": True}
        await service.state.write(scope, keys[2], value)
        _, report = await service.verify(job.id)
        assert not report.ok
        assert report.first_break is not None and report.first_break.position == 2
        await service.state.delete(scope, keys[2])  # removing it instead is caught too
        with pytest.raises(Exception, match=r"gap|missing"):
            await store.load(job.id)


async def test_verify_names_records_cut_from_a_thread_end_and_a_child_thread_deleted(tmp_path: Path) -> None:
    async with service_of(tmp_path) as service:
        job = await service.submit("lead", TurnInput.new("split the work"))
        done = await service.wait(job.id)
        left_id, _ = done.children
        _, records = await service.weave(job.id)
        lead = [r for r in records if r.job == job.id]
        own = [r for r in records if r.kind in ("input", "effect")]
        assert own and all(r.state_hash_pre and r.state_hash_post for r in own), "state hashes like a turn's"
        cut = {lead[-1].id, lead[-2].id} | {r.id for r in records if r.job == left_id}
        scope = WeaveStore.scope(job.id)
        keys = await service.state.list(scope, "")
        for key, record in zip(keys, records, strict=True):
            if record.id in cut:
                await service.state.delete(scope, key)
        _, report = await service.verify(job.id)
        problems = [b.problem for b in report.breaks]
        n = len(lead)
        assert report.anchored and not report.ok
        assert (
            f"thread {job.id}: 2 records missing after #{n - 2} (anchor says {n}, store holds {n - 2}): "
            "the thread was truncated"
        ) in problems
        assert any(p.startswith(f"thread {left_id} is missing: its anchor says") for p in problems)

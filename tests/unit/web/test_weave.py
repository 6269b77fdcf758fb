"""``GET /api/v1/jobs/{id}/weave``: the record graph of a delegated job tree (real runs on the
process backend): one thread per job, the root's first; a child's first record depends on its
parent's thread; the verification names a record tampered with in the store; another tenant's
job is a 404, no credential a 401; the console serves the page that draws it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from airlock.jobs import Job, JobState
from airlock.testing import text_step, tools_step
from airlock.weave import WeaveStore
from layer0 import TurnInput

from .world import World, process_agent, world

pytestmark = pytest.mark.timeout(120)

XSS = "<img src=x onerror=alert(1)>"


def agents() -> dict[str, Any]:
    lead = process_agent(
        [
            tools_step(
                [
                    ("delegate", {"agent": "left", "message": "do the left half"}),
                    ("delegate", {"agent": "right", "message": "do the right half"}),
                ]
            ),
            text_step(f"both done {XSS}"),
        ],
        ("delegate",),
        effects={"delegate": ["left", "right"]},
    )
    return {
        "a": process_agent([text_step("nothing")]),
        "lead": lead,
        "left": process_agent([text_step("left done")]),
        "right": process_agent([text_step("right done")]),
    }


@pytest.fixture
async def tree(tmp_path: Path) -> AsyncIterator[tuple[World, Job]]:
    async with world(tmp_path, agents(), workers=True) as w:
        job = await w.service.submit("lead", TurnInput.new("split"), tenant="red", owner="alice")
        done = await w.service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        yield w, done


async def test_the_graph_has_a_thread_per_job_and_the_children_depend_on_the_parent(
    tree: tuple[World, Job],
) -> None:
    w, job = tree
    async with w.client("alice") as alice:
        response = await alice.get(f"/api/v1/jobs/{job.id}/weave")
        from_child = (await alice.get(f"/api/v1/jobs/{job.children[0]}/weave")).json()
    assert response.status_code == 200, response.text
    graph = response.json()
    assert graph["root"] == job.id and from_child["root"] == job.id
    verification = graph["verification"]
    assert verification == {"ok": True, "records": verification["records"], "breaks": [], "problems": []}
    threads = {t["job"]: t for t in graph["threads"]}
    assert graph["threads"][0]["job"] == job.id
    assert set(threads) == {job.id, *job.children}
    assert {threads[c]["agent"] for c in job.children} == {"left", "right"}
    lead_ids = {r["id"] for r in threads[job.id]["records"]}
    for child in job.children:
        first = threads[child]["records"][0]
        assert first["cross_thread"] and set(first["cross_thread"]) <= lead_ids
    records = [r for t in graph["threads"] for r in t["records"]]
    assert any(XSS in r["summary"] for r in records)  # data, as the agent wrote it
    assert all(len(r["hash"]) == 12 and r["n"] >= 1 for r in records)


async def test_a_record_tampered_with_in_the_store_is_named(tree: tuple[World, Job]) -> None:
    w, job = tree
    scope = WeaveStore.scope(job.id)
    keys = await w.service.state.list(scope, "")
    value = await w.service.state.read(scope, keys[1])
    value["content"] = {"forged": True}
    await w.service.state.write(scope, keys[1], value)
    async with w.client("alice") as alice:
        graph = (await alice.get(f"/api/v1/jobs/{job.id}/weave")).json()
    assert graph["verification"]["ok"] is False
    breaks = graph["verification"]["breaks"]
    assert breaks and {(b["position"], b["record_id"]) for b in breaks} == {(1, breaks[0]["record_id"])}
    assert "modified" in breaks[0]["problem"]
    assert breaks[0]["record_id"] in {r["id"] for t in graph["threads"] for r in t["records"]}


async def test_a_record_the_store_cannot_read_back_is_named_not_a_500(tree: tuple[World, Job]) -> None:
    w, job = tree
    scope = WeaveStore.scope(job.id)
    keys = await w.service.state.list(scope, "")
    await w.service.state.write(scope, keys[2], {"not": "a record"})
    async with w.client("alice") as alice:
        response = await alice.get(f"/api/v1/jobs/{job.id}/weave")
    assert response.status_code == 200, response.text
    verification = response.json()["verification"]
    assert verification["ok"] is False and verification["problems"]
    assert response.json()["threads"] == []


async def test_another_tenant_gets_a_404_and_no_credential_a_401(tree: tuple[World, Job]) -> None:
    w, job = tree
    async with w.client("bob") as bob, w.client() as nobody:
        assert (await bob.get(f"/api/v1/jobs/{job.id}/weave")).status_code == 404
        assert (await nobody.get(f"/api/v1/jobs/{job.id}/weave")).status_code == 401


async def test_the_console_serves_the_weave_page(tree: tuple[World, Job]) -> None:
    w, job = tree
    async with w.client("alice") as alice:
        page = await alice.get(f"/jobs/{job.id}/weave")
        job_page = await alice.get(f"/jobs/{job.id}")
    assert page.status_code == 200 and 'data-page="weave"' in page.text and 'id="graph"' in page.text
    assert f'href="/jobs/{job.id}/weave"' in job_page.text

"""The HTTP API against a real server (uvicorn on loopback over a real JobService): every
route, 401s that say nothing, permissions and tenants as the gRPC API's (another tenant's job
is a 404 word for word as a missing one), precise 4xx errors, and the OpenAPI document."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airlock.controller import AuditFilter, new_job_id
from airlock.jobs import MAX_MESSAGE_BYTES

from .world import World, world

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    async with world(tmp_path) as made:
        yield made


def error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]  # type: ignore[no-any-return]


async def test_health_needs_no_credential_and_says_nothing_else(w: World) -> None:
    async with w.client() as anonymous:
        response = await anonymous.get("/api/v1/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/jobs"),
        ("GET", "/api/v1/jobs/{red}"),
        ("POST", "/api/v1/jobs"),
        ("POST", "/api/v1/jobs/{red}/cancel"),
        ("POST", "/api/v1/jobs/{red}/fork"),
        ("GET", "/api/v1/jobs/{red}/events"),
        ("GET", "/api/v1/jobs/{red}/egress"),
        ("GET", "/api/v1/jobs/{red}/artifacts"),
        ("GET", "/api/v1/jobs/{red}/artifacts/out/r.txt"),
        ("GET", "/api/v1/approvals"),
        ("POST", "/api/v1/jobs/{red}/approve"),
        ("POST", "/api/v1/jobs/{red}/reject"),
        ("GET", "/api/v1/agents"),
        ("GET", "/api/v1/agents/a"),
        ("GET", "/api/v1/whoami"),
        ("POST", "/logout"),
    ],
)
@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic eDp5", "Bearer"])
async def test_without_a_valid_credential_every_route_is_401_and_nothing_else(
    w: World, method: str, path: str, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with w.client() as anonymous:
        response = await anonymous.request(method, path.format(red=w.red.id), headers=headers, json={})
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "UNAUTHENTICATED", "message": "authentication required"}}
    assert w.red.id not in response.text


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/api/v1/jobs", b"{"),
        ("/api/v1/jobs", b"x" * (MAX_MESSAGE_BYTES + 1)),
        ("/api/v1/jobs/j1/reject", b"[]"),
        ("/api/v1/nowhere", b""),
    ],
)
async def test_an_unauthenticated_request_is_401_whatever_else_is_wrong_with_it(
    w: World, path: str, content: bytes
) -> None:
    async with w.client() as anonymous:
        response = await anonymous.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "UNAUTHENTICATED", "message": "authentication required"}}


async def test_show_a_job_of_ones_tenant(w: World) -> None:
    async with w.client("carol") as carol:
        response = await carol.get(f"/api/v1/jobs/{w.red.id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["agent"], body["tenant"], body["owner"]) == (w.red.id, "a", "red", "alice")
    assert body["state"] == "queued"


async def test_another_tenants_job_is_404_word_for_word_as_a_missing_one(w: World) -> None:
    missing = new_job_id()
    async with w.client("bob") as bob:
        for template in (
            "/api/v1/jobs/{}",
            "/api/v1/jobs/{}/events",
            "/api/v1/jobs/{}/artifacts",
            "/api/v1/jobs/{}/artifacts/out/r.txt",
        ):
            theirs = await bob.get(template.format(w.red.id))
            nothing = await bob.get(template.format(missing))
            assert theirs.status_code == nothing.status_code == 404, template
            assert theirs.text.replace(w.red.id, "<id>") == nothing.text.replace(missing, "<id>")
        for action, body in (("cancel", {}), ("approve", {}), ("reject", {"reason": "no"})):
            theirs = await bob.post(f"/api/v1/jobs/{w.red.id}/{action}", json=body)
            nothing = await bob.post(f"/api/v1/jobs/{missing}/{action}", json=body)
            assert theirs.status_code == nothing.status_code == 404, action
            assert theirs.text.replace(w.red.id, "<id>") == nothing.text.replace(missing, "<id>")
    assert (await w.service.get(w.red.id)).state == "queued", "bob changed nothing"


async def test_list_is_scoped_to_the_callers_tenant_and_filters(w: World) -> None:
    async with w.client("carol") as carol:
        mine = (await carol.get("/api/v1/jobs")).json()
        assert [j["id"] for j in mine["jobs"]] == [w.red.id]
        refused = await carol.get("/api/v1/jobs", params={"tenant": "blue"})
        assert refused.status_code == 403
        assert error(refused)["code"] == "PERMISSION_DENIED"
        none = (await carol.get("/api/v1/jobs", params={"state": "succeeded"})).json()
        assert none["jobs"] == []
    async with w.client("root") as root:
        everyone = (await root.get("/api/v1/jobs")).json()
        assert {j["id"] for j in everyone["jobs"]} == {w.red.id, w.blue.id}
        blue = (await root.get("/api/v1/jobs", params={"tenant": "blue", "agent": "a"})).json()
        assert [j["id"] for j in blue["jobs"]] == [w.blue.id]


async def test_list_pages_with_an_opaque_token_tied_to_its_filters(w: World) -> None:
    async with w.client("root") as root:
        first = (await root.get("/api/v1/jobs", params={"page_size": 1})).json()
        assert [j["id"] for j in first["jobs"]] == [w.blue.id] and first["next_page_token"]
        token = first["next_page_token"]
        second = (await root.get("/api/v1/jobs", params={"page_size": 1, "page_token": token})).json()
        assert [j["id"] for j in second["jobs"]] == [w.red.id]
        other = await root.get("/api/v1/jobs", params={"page_size": 1, "page_token": token, "agent": "a"})
        assert other.status_code == 422 and error(other)["fields"] == ["page_token"]
        forged = await root.get("/api/v1/jobs", params={"page_token": "bm90IGEgdG9rZW4"})
        assert forged.status_code == 422 and error(forged)["fields"] == ["page_token"]


async def test_submit_as_the_caller_in_its_tenant_and_audited(w: World) -> None:
    async with w.client("dave") as dave:
        response = await dave.post(
            "/api/v1/jobs",
            json={
                "agent": "a",
                "message": "hello",
                "session": "s-1",
                "files": [{"path": "in.txt", "content_base64": base64.b64encode(b"hi").decode()}],
            },
        )
        assert response.status_code == 201, response.text
        job = response.json()
        assert (job["tenant"], job["owner"], job["agent"]) == ("red", "dave", "a")
        assert [f.path for f in await w.service.input_files(job["id"])] == ["in.txt"]
        refused = await dave.post("/api/v1/jobs", json={"agent": "ops", "message": "hello"})
        assert refused.status_code == 403
        assert "needs permission" in error(refused)["message"]
    audit = await w.store.audit(AuditFilter(principal="dave"))
    assert [(e.action, e.outcome, e.target) for e in audit] == [  # newest first
        ("SubmitJob", "PERMISSION_DENIED", ""),
        ("SubmitJob", "OK", job["id"]),
    ]
    assert all(e.peer.startswith("http:127.0.0.1") for e in audit)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": "hi"}, "agent"),
        ({"agent": "a"}, "message"),
        ({"agent": "a", "message": ""}, "message"),
        ({"agent": "a", "message": "hi", "max_duration_ms": 0}, "max_duration_ms"),
        ({"agent": "a", "message": "hi", "surprise": 1}, "surprise"),
        (
            {"agent": "a", "message": "hi", "files": [{"path": "x", "content_base64": "!!"}]},
            "files.0.content_base64",
        ),
        ({"agent": "a", "message": "hi", "files": [{"path": "../x", "content_base64": ""}]}, "files"),
    ],
)
async def test_a_malformed_submission_is_422_naming_the_field(
    w: World, body: dict[str, object], field: str
) -> None:
    async with w.client("alice") as alice:
        response = await alice.post("/api/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    found = error(response)
    assert found["code"] == "INVALID_ARGUMENT"
    assert field in found["fields"]


async def test_bad_input_elsewhere_is_precise(w: World) -> None:
    async with w.client("alice") as alice:
        unknown = await alice.post("/api/v1/jobs", json={"agent": "nope", "message": "hi"})
        assert unknown.status_code == 404 and "unknown agent" in error(unknown)["message"]
        not_json = await alice.post(
            "/api/v1/jobs", content=b"{", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 422
        page = await alice.get("/api/v1/jobs", params={"page_size": 0})
        assert page.status_code == 422 and error(page)["fields"] == ["page_size"]
        state = await alice.get("/api/v1/jobs", params={"state": "sleeping"})
        assert state.status_code == 422 and error(state)["fields"] == ["state.0"]
        reject = await alice.post(f"/api/v1/jobs/{w.red.id}/reject", json={"reason": "  "})
        assert reject.status_code == 422 and error(reject)["fields"] == ["reason"]
        huge = await alice.post("/api/v1/jobs", json={"agent": "a", "message": "x" * MAX_MESSAGE_BYTES})
        assert huge.status_code == 413 and error(huge)["code"] == "TOO_LARGE"
        undeclared = await alice.post(
            "/api/v1/jobs",
            content=_pieces(b"x" * MAX_MESSAGE_BYTES),
            headers={"content-type": "application/json"},
        )
        assert undeclared.status_code == 413 and error(undeclared)["code"] == "TOO_LARGE"
        nowhere = await alice.get("/api/v1/nowhere")
        assert nowhere.status_code == 404 and error(nowhere)["code"] == "NOT_FOUND"


async def _pieces(data: bytes) -> AsyncIterator[bytes]:
    """``data`` in a chunked body (no Content-Length)."""
    yield b'{"agent": "a", "message": "'
    for at in range(0, len(data), 1 << 20):
        yield data[at : at + (1 << 20)]
    yield b'"}'


async def test_cancel_is_the_submitters_and_a_job_not_awaiting_approval_is_409(w: World) -> None:
    async with w.client("carol") as carol:
        refused = await carol.post(f"/api/v1/jobs/{w.red.id}/cancel", json={"reason": "mine"})
        assert refused.status_code == 403 and error(refused)["code"] == "PERMISSION_DENIED"
        no_approver = await carol.post(f"/api/v1/jobs/{w.red.id}/approve")
        assert no_approver.status_code == 403
    async with w.client("alice") as alice:
        waiting = await alice.post(f"/api/v1/jobs/{w.red.id}/approve", json={"comment": "ok"})
        assert waiting.status_code == 409 and error(waiting)["code"] == "NOT_AWAITING"
        cancelled = await alice.post(f"/api/v1/jobs/{w.red.id}/cancel", json={"reason": "changed my mind"})
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        assert (await alice.get("/api/v1/approvals")).json() == {"pending": []}


async def test_artifacts_list_and_download(w: World) -> None:
    await w.store.save_artifacts(w.red.id, [("out/r.txt", b"<script>red</script>")])
    async with w.client("carol") as carol:
        listed = (await carol.get(f"/api/v1/jobs/{w.red.id}/artifacts")).json()
        assert [(a["path"], a["size"]) for a in listed["artifacts"]] == [("out/r.txt", 20)]
        got = await carol.get(f"/api/v1/jobs/{w.red.id}/artifacts/out/r.txt")
        assert got.content == b"<script>red</script>"
        assert got.headers["content-type"] == "application/octet-stream"
        assert got.headers["content-disposition"].startswith("attachment")
        missing = await carol.get(f"/api/v1/jobs/{w.red.id}/artifacts/out/none.txt")
        assert missing.status_code == 404


async def test_agents_with_their_effective_policy(w: World) -> None:
    async with w.client("carol") as carol:
        agents = (await carol.get("/api/v1/agents")).json()["agents"]
        assert [a["name"] for a in agents] == ["a", "ops"]
        one = (await carol.get("/api/v1/agents/a")).json()
        assert one["backend"] == "process" and one["egress"]["default"]
        assert "environment" in one and "effects" in one
        missing = await carol.get("/api/v1/agents/zzz")
        assert missing.status_code == 404


async def test_the_openapi_document_lists_every_route(w: World) -> None:
    async with w.client() as anonymous:
        document = (await anonymous.get("/api/v1/openapi.json")).json()
    paths = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert paths == {
        ("GET", "/api/v1/health"),
        ("GET", "/api/v1/whoami"),
        ("POST", "/login"),
        ("POST", "/logout"),
        ("GET", "/api/v1/jobs"),
        ("POST", "/api/v1/jobs"),
        ("GET", "/api/v1/jobs/{job_id}"),
        ("POST", "/api/v1/jobs/{job_id}/cancel"),
        ("POST", "/api/v1/jobs/{job_id}/fork"),
        ("GET", "/api/v1/jobs/{job_id}/events"),
        ("GET", "/api/v1/jobs/{job_id}/egress"),
        ("GET", "/api/v1/jobs/{job_id}/artifacts"),
        ("GET", "/api/v1/jobs/{job_id}/artifacts/{path}"),
        ("GET", "/api/v1/approvals"),
        ("POST", "/api/v1/jobs/{job_id}/approve"),
        ("POST", "/api/v1/jobs/{job_id}/reject"),
        ("GET", "/api/v1/agents"),
        ("GET", "/api/v1/agents/{name}"),
        ("GET", "/api/v1/agents/{name}/usage"),
        ("GET", "/api/v1/jobs/{job_id}/weave"),
    }
    assert set(document["components"]["securitySchemes"]) == {"bearer", "login"}
    assert document["security"] == [{"bearer": []}, {"login": []}]
    assert document["paths"]["/api/v1/health"]["get"]["security"] == []
    assert "security" not in document["paths"]["/api/v1/jobs"]["get"]  # the document's default

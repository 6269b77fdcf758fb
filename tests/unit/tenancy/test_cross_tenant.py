"""The cross-tenant attack suite: for every RPC of the Controller service, a principal of
another tenant learns nothing (another tenant's job answers exactly as an id that never
existed), and a principal without the role is refused naming the permission it lacks. Real
gRPC, real JobService and SQLite; principals by token (their roles resolved by the real
RoleBook)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.controller import new_job_id
from airlock.controller._callers import peer_host
from airlock.identity._throttle import MAX_FAILURES
from airlock.jobs import JobFilter, JobState
from airlock.jobs import convert as jc
from layer0 import TurnInput

from .world import World, world

SERVICE = cpb.DESCRIPTOR.services_by_name["Controller"]

#: Every RPC that names a job, and a request for it naming ``id``.
BY_JOB: dict[str, Callable[[str], Any]] = {
    "GetJob": lambda i: cpb.GetJobRequest(id=i),
    "WatchJob": lambda i: cpb.WatchJobRequest(id=i),
    "ListArtifacts": lambda i: cpb.ListArtifactsRequest(id=i),
    "GetArtifact": lambda i: cpb.GetArtifactRequest(id=i, path="out/r.txt"),
    "CancelJob": lambda i: cpb.CancelJobRequest(id=i, reason="mine now"),
    "ForkJob": lambda i: cpb.ForkJobRequest(id=i, message="now mine"),
    "GetJobLogs": lambda i: cpb.GetJobLogsRequest(id=i),
    "ApproveJob": lambda i: cpb.ApproveJobRequest(id=i),
    "RejectJob": lambda i: cpb.RejectJobRequest(id=i, reason="no"),
    "PauseJob": lambda i: cpb.PauseJobRequest(id=i),
    "ResumeJob": lambda i: cpb.ResumeJobRequest(id=i),
    "StepJob": lambda i: cpb.StepJobRequest(id=i),
    "InspectJob": lambda i: cpb.InspectJobRequest(id=i),
    "GetWeave": lambda i: cpb.GetWeaveRequest(id=i),
    "VerifyJob": lambda i: cpb.VerifyJobRequest(id=i),
}
#: Every RPC that names a long-lived sandbox, and a request for it naming ``id``.
BY_SANDBOX: dict[str, Callable[[str], Any]] = {
    "GetSandbox": lambda i: cpb.GetSandboxRequest(id=i),
    "PauseSandbox": lambda i: cpb.PauseSandboxRequest(id=i),
    "ResumeSandbox": lambda i: cpb.ResumeSandboxRequest(id=i),
    "RemoveSandbox": lambda i: cpb.RemoveSandboxRequest(id=i),
    "SubmitJob": lambda i: cpb.SubmitJobRequest(
        agent="a", input=wire.input_to_proto(TurnInput.new("in your box")), sandbox=i
    ),
}
#: The RPCs that name no job, each tested below by name.
NOT_BY_JOB = frozenset(
    {
        "SubmitJob",
        "ListJobs",
        "ListAgents",
        "GetStatus",
        "SignalWorkflow",
        "QueryWorkflow",
        "WhoAmI",
        "CreateKey",
        "ListKeys",
        "RevokeKey",
        "ListTenants",
        "ListAudit",
        "PruneJobs",
        "CreateSandbox",
        "ListSandboxes",
    }
)


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    async with world(tmp_path) as made:
        yield made


def test_the_suite_covers_every_rpc() -> None:
    assert set(BY_JOB) | set(BY_SANDBOX) | NOT_BY_JOB == {m.name for m in SERVICE.methods}
    assert not set(BY_JOB) & NOT_BY_JOB and not set(BY_JOB) & set(BY_SANDBOX)


@pytest.mark.parametrize("method", sorted(BY_SANDBOX))
async def test_another_tenants_sandbox_answers_as_one_that_never_existed(w: World, method: str) -> None:
    never = "sbx-" + new_job_id()[1:]
    theirs = await w.refused("bob", method, BY_SANDBOX[method](w.red_sandbox.id))
    unknown = await w.refused("bob", method, BY_SANDBOX[method](never))
    assert theirs.code() == grpc.StatusCode.NOT_FOUND
    assert _shape(theirs, w.red_sandbox.id) == _shape(unknown, never)
    assert await w.service.sandboxes.get(w.red_sandbox.id, None) == w.red_sandbox
    assert {j.id for j in await w.service.find(JobFilter())} == {w.red.id, w.blue.id}  # nothing submitted


async def test_sandboxes_list_only_the_callers_tenant_and_steer_only_for_their_creator(w: World) -> None:
    assert list((await w.call("bob", "ListSandboxes", cpb.ListSandboxesRequest())).sandboxes) == []
    listed = await w.call("carol", "ListSandboxes", cpb.ListSandboxesRequest())
    assert [s.id for s in listed.sandboxes] == [w.red_sandbox.id]  # a viewer of red
    assert (await w.call("carol", "GetSandbox", cpb.GetSandboxRequest(id=w.red_sandbox.id))).owner == "alice"
    for method in ("PauseSandbox", "ResumeSandbox", "RemoveSandbox"):
        refused = await w.refused("carol", method, BY_SANDBOX[method](w.red_sandbox.id))
        assert _permission(refused) == "jobs.own", method
    in_box = await w.refused("carol", "SubmitJob", BY_SANDBOX["SubmitJob"](w.red_sandbox.id))
    assert _permission(in_box) == "jobs.submit"
    everyone = await w.call("root", "ListSandboxes", cpb.ListSandboxesRequest())
    assert [s.tenant for s in everyone.sandboxes] == ["red"]
    create = cpb.CreateSandboxRequest(agent="ops")
    assert _permission(await w.refused("dave", "CreateSandbox", create)) == "jobs.submit"


def _shape(error: grpc.aio.AioRpcError, job_id: str) -> tuple[Any, ...]:
    """What a caller can observe of a refusal, with the id it named blanked out."""
    details = wire.status_details(error)
    return (
        error.code(),
        (error.details() or "").replace(job_id, "<id>"),
        details.reason,
        details.domain,
        dict(details.metadata),
        details.violations,
    )


@pytest.mark.parametrize("method", sorted(BY_JOB))
async def test_another_tenants_job_answers_as_one_that_never_existed(w: World, method: str) -> None:
    never = new_job_id()
    theirs = await w.refused("bob", method, BY_JOB[method](w.red.id))
    unknown = await w.refused("bob", method, BY_JOB[method](never))
    assert theirs.code() == grpc.StatusCode.NOT_FOUND
    assert _shape(theirs, w.red.id) == _shape(unknown, never)
    after = await w.service.get(w.red.id)
    assert after.state is JobState.QUEUED and after.approval is None
    assert [e.data.kind for e in await w.store.events(w.red.id)] == ["state"]


async def test_an_administrator_reaches_every_tenant(w: World) -> None:
    got = await w.call("root", "GetJob", cpb.GetJobRequest(id=w.red.id))
    assert (got.tenant, got.owner) == ("red", "alice")
    listed = await w.call("root", "ListJobs", cpb.ListJobsRequest())
    assert {j.id for j in listed.jobs} == {w.red.id, w.blue.id}
    only_red = await w.call("root", "ListJobs", cpb.ListJobsRequest(tenant="red"))
    assert [j.id for j in only_red.jobs] == [w.red.id]


async def test_listing_shows_only_the_callers_tenant(w: World) -> None:
    listed = await w.call("bob", "ListJobs", cpb.ListJobsRequest())
    assert [j.id for j in listed.jobs] == [w.blue.id]
    by_session = await w.call("bob", "ListJobs", cpb.ListJobsRequest(workflow="shared"))
    assert [j.id for j in by_session.jobs] == [w.blue.id]
    asked = await w.refused("bob", "ListJobs", cpb.ListJobsRequest(tenant="red"))
    assert asked.code() == grpc.StatusCode.PERMISSION_DENIED
    assert wire.status_details(asked).metadata["permission"] == "controller.admin"


async def test_a_signal_reaches_only_the_senders_tenant(w: World) -> None:
    sent = await w.call(
        "bob", "SignalWorkflow", cpb.SignalWorkflowRequest(workflow="shared", signal_type="go")
    )
    assert sent.count == 1 and list(sent.delivered_to) == []
    assert [e.data.kind for e in await w.store.events(w.red.id)] == ["state"]
    assert [e.data.kind for e in await w.store.events(w.blue.id)] == ["state", "signal"]
    theirs = await w.call(
        "alice", "SignalWorkflow", cpb.SignalWorkflowRequest(workflow="shared", signal_type="go")
    )
    assert theirs.count == 1  # red's workflow "shared" is not blue's


async def test_a_workflow_query_answers_only_of_the_callers_tenant(w: World) -> None:
    def status(workflow: str) -> cpb.QueryWorkflowRequest:
        return cpb.QueryWorkflowRequest(workflow=workflow, query_type="status")

    async def job_ids(caller: str, workflow: str) -> list[str]:
        answer: Any = wire.json_from_proto((await w.call(caller, "QueryWorkflow", status(workflow))).result)
        return [j["id"] for j in answer["jobs"]]

    assert await job_ids("bob", "shared") == [w.blue.id]  # red's "shared" is another workflow
    assert await job_ids("carol", "shared") == [w.red.id]
    await w.call("alice", "SignalWorkflow", cpb.SignalWorkflowRequest(workflow="red-only", signal_type="go"))
    theirs = await w.refused("bob", "QueryWorkflow", status("red-only"))
    never = await w.refused("bob", "QueryWorkflow", status("never-used"))
    assert theirs.code() == grpc.StatusCode.NOT_FOUND
    assert _shape(theirs, "red-only") == _shape(never, "never-used")
    assert await w.call("alice", "QueryWorkflow", status("red-only"))
    nobody = await w.refused(None, "QueryWorkflow", status("shared"))
    assert nobody.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_submission_belongs_to_its_submitters_tenant(w: World) -> None:
    request = cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("hi")))
    job = jc.job_from_proto(await w.call("bob", "SubmitJob", request))
    assert (job.tenant, job.owner) == ("blue", "bob")
    assert (
        await w.refused("alice", "GetJob", cpb.GetJobRequest(id=job.id))
    ).code() == grpc.StatusCode.NOT_FOUND


async def test_tenants_and_the_audit_log_show_only_the_callers_tenant(w: World) -> None:
    await w.call("alice", "CancelJob", cpb.CancelJobRequest(id=w.red.id, reason="done"))
    await w.refused("bob", "CancelJob", cpb.CancelJobRequest(id=w.red.id))
    tenants = await w.call("bob", "ListTenants", cpb.ListTenantsRequest())
    assert [t.tenant for t in tenants.tenants] == ["blue"]
    audit = await w.call("bob", "ListAudit", cpb.ListAuditRequest())
    assert [(e.principal, e.tenant, e.action, e.outcome) for e in audit.entries] == [
        ("bob", "blue", "CancelJob", "NOT_FOUND")
    ]
    asked = await w.refused("bob", "ListAudit", cpb.ListAuditRequest(tenant="red"))
    assert wire.status_details(asked).metadata["permission"] == "controller.admin"
    me = await w.call("bob", "WhoAmI", cpb.WhoAmIRequest())
    assert (me.name, me.tenant, list(me.roles)) == ("bob", "blue", ["submitter", "viewer", "approver"])


# -- roles inside a tenant --------------------------------------------------------------------------


def _permission(error: grpc.aio.AioRpcError) -> str:
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error
    return wire.status_details(error).metadata["permission"]


async def test_a_viewer_reads_but_neither_submits_nor_steers(w: World) -> None:
    assert (await w.call("carol", "GetJob", cpb.GetJobRequest(id=w.red.id))).id == w.red.id
    assert len((await w.call("carol", "ListJobs", cpb.ListJobsRequest())).jobs) == 1
    cancel = await w.refused("carol", "CancelJob", cpb.CancelJobRequest(id=w.red.id))
    assert _permission(cancel) == "jobs.own"
    request = cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("hi")))
    assert _permission(await w.refused("carol", "SubmitJob", request)) == "jobs.submit"
    assert (
        _permission(await w.refused("carol", "ApproveJob", cpb.ApproveJobRequest(id=w.red.id)))
        == "jobs.approve"
    )
    assert (await w.service.get(w.red.id)).state is JobState.QUEUED


async def test_a_submitter_sees_and_steers_only_its_own_jobs_of_its_agents(w: World) -> None:
    request = cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("mine")))
    mine = await w.call("dave", "SubmitJob", request)
    request.agent = "ops"
    assert _permission(await w.refused("dave", "SubmitJob", request)) == "jobs.submit"
    assert _permission(await w.refused("dave", "GetJob", cpb.GetJobRequest(id=w.red.id))) == "jobs.read"
    assert [j.id for j in (await w.call("dave", "ListJobs", cpb.ListJobsRequest())).jobs] == [mine.id]
    assert (await w.call("dave", "GetJob", cpb.GetJobRequest(id=mine.id))).owner == "dave"
    assert (
        _permission(await w.refused("dave", "ApproveJob", cpb.ApproveJobRequest(id=mine.id)))
        == "jobs.approve"
    )
    cancelled = await w.call("dave", "CancelJob", cpb.CancelJobRequest(id=mine.id))
    assert cancelled.state == cpb.JOB_STATE_CANCELLED


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("GetStatus", cpb.GetStatusRequest()),
        ("CreateKey", cpb.CreateKeyRequest(name="x", tenant="blue", roles=["admin"])),
        ("ListKeys", cpb.ListKeysRequest()),
        ("RevokeKey", cpb.RevokeKeyRequest(id="ak_000000000000")),
        ("PruneJobs", cpb.PruneJobsRequest(older_than=wire.duration_to_proto(1), tenant="red")),
    ],
)
async def test_only_an_administrator_manages_keys_and_reads_the_controller(
    w: World, method: str, request_: Any
) -> None:
    assert _permission(await w.refused("bob", method, request_)) == "controller.admin"
    assert await w.keys.list() == []
    assert len(await w.service.find()) == 2  # a prune refused removed nothing


async def test_every_agent_is_listed_to_any_principal(w: World) -> None:
    agents = await w.call("carol", "ListAgents", cpb.ListAgentsRequest())
    assert [a.name for a in agents.agents] == ["a", "ops"]


@pytest.mark.parametrize("credential", [None, "nobody"])
async def test_without_a_valid_credential_nothing_runs(w: World, credential: str | None) -> None:
    request = cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("hi")))
    error = await w.refused(credential, "SubmitJob", request)
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert len(await w.service.find()) == 2
    assert await w.call("root", "ListAudit", cpb.ListAuditRequest()) == cpb.ListAuditResponse()


async def test_guessing_credentials_over_grpc_is_throttled_per_address(w: World) -> None:
    request = cpb.ListAgentsRequest()
    for _ in range(MAX_FAILURES):
        assert (await w.refused("nobody", "ListAgents", request)).code() == grpc.StatusCode.UNAUTHENTICATED
    throttled = await w.refused("carol", "ListAgents", request)  # a good credential, the same address
    assert throttled.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "too many failed authentications" in (throttled.details() or "")


def test_a_peer_is_its_address_without_the_port() -> None:
    assert peer_host("ipv4:10.0.0.7:5123") == "ipv4:10.0.0.7"
    assert peer_host("ipv6:[::1]:5123") == "ipv6:[::1]"
    assert peer_host("unix:/run/airlock.sock") == "unix:/run/airlock.sock"

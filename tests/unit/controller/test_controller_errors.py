"""The controller's refusals over a real ControllerServer (a real JobService, not started: no
workers): each carries a ``google.rpc.Status`` with ErrorInfo (a stable reason, domain
airlock.dev), a BadRequest violation per problem of a malformed request (decoding and
validation problems together), RetryInfo when trying again can succeed; ControllerError
exposes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.config import load_config
from airlock.controller import (
    ERROR_REASONS,
    AgentRunner,
    ControllerClient,
    ControllerError,
    ControllerServer,
    JobService,
    SqliteJobStore,
)
from airlock.state import SqliteStore
from layer0 import TurnInput

TOKEN = "t0ken"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ControllerServer]:
    (tmp_path / "s.yaml").write_text("steps: []\n")
    config = tmp_path / "airlock.yaml"
    config.write_text(
        "version: 1\nagents:\n  a:\n    provider: {kind: scripted, script: s.yaml}\n    backend: process\n"
    )
    async with SqliteJobStore(tmp_path / "jobs.db") as store, SqliteStore(tmp_path / "state.db") as state:
        service = JobService(store, AgentRunner(load_config(config)), state)  # not started: no workers
        async with ControllerServer(service, TOKEN, "127.0.0.1:0") as started:
            yield started


@pytest.fixture
async def client(server: ControllerServer) -> AsyncIterator[ControllerClient]:
    async with ControllerClient(server.address, TOKEN) as connected:
        yield connected


async def _refused(server: ControllerServer, method: str, request: object) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(str(server.address)) as channel:
        stub = cpb_grpc.ControllerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(stub, method)(request, metadata=AUTH)
    return caught.value


def _valid_submit() -> cpb.SubmitJobRequest:
    return cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("hi")))


async def test_every_problem_of_a_submission_is_reported_at_once(server: ControllerServer) -> None:
    request = _valid_submit()
    request.agent = ""
    request.input.metadata.text = "{not json"  # a decoding problem
    request.max_duration.seconds = -3  # a validation problem
    request.until_stable.window = 1  # below the minimum
    error = await _refused(server, "SubmitJob", request)
    details = wire.status_details(error)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (details.reason, details.domain) == ("INVALID_ARGUMENT", "airlock.dev")
    paths = [path for path, _ in details.violations]
    assert paths == ["agent", "input.metadata", "max_duration", "until_stable.window"], details.violations
    assert (error.details() or "").splitlines() == [f"{p}: {text}" for p, text in details.violations]


async def test_an_unknown_job_is_not_found_with_its_reason(client: ControllerClient) -> None:
    for call in (
        client.get("j-nope"),
        client.cancel("j-nope"),
        client.artifacts("j-nope"),
        client.pause("j-nope"),
    ):
        with pytest.raises(ControllerError) as caught:
            await call
        assert (caught.value.code, caught.value.reason) == ("NOT_FOUND", "NOT_FOUND")


async def test_a_request_naming_no_job_is_invalid_on_its_id(client: ControllerClient) -> None:
    for call in (client.get(""), client.logs(""), client.inspect(""), client.weave("")):
        with pytest.raises(ControllerError) as caught:
            await call
        assert (caught.value.code, caught.value.reason) == ("INVALID_ARGUMENT", "INVALID_ARGUMENT")
        assert caught.value.violations == (("id", "is required"),)


async def test_an_unknown_agent_is_not_found(client: ControllerClient) -> None:
    with pytest.raises(ControllerError) as caught:
        await client.submit("nobody", "hi")
    assert (caught.value.code, caught.value.reason) == ("NOT_FOUND", "NOT_FOUND")


async def test_a_job_not_in_the_needed_state_is_not_awaiting(client: ControllerClient) -> None:
    job = await client.submit("a", "hi")  # stays queued: the service has no workers
    for call in (client.approve(job.id, "ana"), client.pause(job.id), client.step(job.id)):
        with pytest.raises(ControllerError) as caught:
            await call
        assert (caught.value.code, caught.value.reason) == ("FAILED_PRECONDITION", "NOT_AWAITING")


async def test_a_decision_without_approver_nor_reason_names_both(server: ControllerServer) -> None:
    error = await _refused(server, "RejectJob", cpb.RejectJobRequest(reason=" "))
    assert [path for path, _ in wire.status_details(error).violations] == ["id", "approver", "reason"]


async def test_an_unknown_state_filter_is_a_violation_on_it(server: ControllerServer) -> None:
    error = await _refused(server, "ListJobs", cpb.ListJobsRequest(states=[1, 99]))  # type: ignore[list-item]
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [path for path, _ in wire.status_details(error).violations] == ["states[1]"]


async def test_files_over_the_cap_are_resource_exhausted(server: ControllerServer) -> None:
    request = _valid_submit()
    request.files.extend(cpb.JobFile(path=f"f{i}", data=b"x") for i in range(201))
    error = await _refused(server, "SubmitJob", request)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert wire.status_details(error).reason == "FILES_OVER_CAP"


async def test_a_zero_max_duration_means_the_default(client: ControllerClient) -> None:
    request = _valid_submit()
    request.max_duration.SetInParent()
    job = await client._call("SubmitJob", request)
    assert job.max_duration.seconds > 0


async def test_a_stopping_controller_asks_to_retry(
    server: ControllerServer, client: ControllerClient
) -> None:
    await server.begin_shutdown()
    with pytest.raises(ControllerError) as caught:
        await client.get("j-any")
    assert (caught.value.code, caught.value.reason) == ("UNAVAILABLE", "SHUTTING_DOWN")
    assert caught.value.retry_after_s == 1.0 and "shutting down" in str(caught.value)


def test_every_reason_is_documented() -> None:
    assert all(reason.isupper() and text for reason, text in ERROR_REASONS.items())

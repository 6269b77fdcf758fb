"""The controller's refusals over a real ControllerServer (a real JobService, not started: no
workers): each carries a ``google.rpc.Status`` with ErrorInfo (a stable reason, domain
airlock.dev), a BadRequest violation per problem of a malformed request (decoding and
validation problems together), RetryInfo when trying again can succeed; ControllerError
exposes them."""

from __future__ import annotations

import grpc
import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.controller import ERROR_REASONS, ControllerServer
from airlock.jobs import ControllerClient, ControllerError
from layer0 import TurnInput

TOKEN = "t0ken"  # the token of the real_server fixture (conftest.py)

AUTH = (("authorization", f"Bearer {TOKEN}"),)


async def _refused(real_server: ControllerServer, method: str, request: object) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(str(real_server.address)) as channel:
        stub = cpb_grpc.ControllerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(stub, method)(request, metadata=AUTH)
    return caught.value


def _valid_submit() -> cpb.SubmitJobRequest:
    return cpb.SubmitJobRequest(agent="a", input=wire.input_to_proto(TurnInput.new("hi")))


async def test_every_problem_of_a_submission_is_reported_at_once(real_server: ControllerServer) -> None:
    request = _valid_submit()
    request.agent = ""
    request.input.metadata.text = "{not json"  # a decoding problem
    request.max_duration.seconds = -3  # a validation problem
    request.until_stable.window = 1  # below the minimum
    error = await _refused(real_server, "SubmitJob", request)
    details = wire.status_details(error)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (details.reason, details.domain) == ("INVALID_ARGUMENT", "airlock.dev")
    paths = [path for path, _ in details.violations]
    assert paths == ["agent", "input.metadata", "max_duration", "until_stable.window"], details.violations
    assert (error.details() or "").splitlines() == [f"{p}: {text}" for p, text in details.violations]


async def test_an_unknown_job_is_not_found_with_its_reason(real_client: ControllerClient) -> None:
    for call in (
        real_client.get("j-nope"),
        real_client.cancel("j-nope"),
        real_client.artifacts("j-nope"),
        real_client.pause("j-nope"),
    ):
        with pytest.raises(ControllerError) as caught:
            await call
        assert (caught.value.code, caught.value.reason) == ("NOT_FOUND", "NOT_FOUND")


async def test_a_request_naming_no_job_is_invalid_on_its_id(real_client: ControllerClient) -> None:
    for call in (real_client.get(""), real_client.logs(""), real_client.inspect(""), real_client.weave("")):
        with pytest.raises(ControllerError) as caught:
            await call
        assert (caught.value.code, caught.value.reason) == ("INVALID_ARGUMENT", "INVALID_ARGUMENT")
        assert caught.value.violations == (("id", "is required"),)


async def test_an_unknown_agent_is_not_found(real_client: ControllerClient) -> None:
    with pytest.raises(ControllerError) as caught:
        await real_client.submit("nobody", "hi")
    assert (caught.value.code, caught.value.reason) == ("NOT_FOUND", "NOT_FOUND")


async def test_a_job_not_in_the_needed_state_is_not_awaiting(real_client: ControllerClient) -> None:
    job = await real_client.submit("a", "hi")  # stays queued: the service has no workers
    for call in (real_client.approve(job.id), real_client.pause(job.id), real_client.step(job.id)):
        with pytest.raises(ControllerError) as caught:
            await call
        assert (caught.value.code, caught.value.reason) == ("FAILED_PRECONDITION", "NOT_AWAITING")


async def test_a_decision_without_job_nor_reason_names_both(real_server: ControllerServer) -> None:
    error = await _refused(real_server, "RejectJob", cpb.RejectJobRequest(reason=" "))
    assert [path for path, _ in wire.status_details(error).violations] == ["id", "reason"]


async def test_an_unknown_state_filter_is_a_violation_on_it(real_server: ControllerServer) -> None:
    error = await _refused(real_server, "ListJobs", cpb.ListJobsRequest(states=[1, 99]))  # type: ignore[list-item]
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [path for path, _ in wire.status_details(error).violations] == ["states[1]"]


async def test_files_over_the_cap_are_resource_exhausted(real_server: ControllerServer) -> None:
    request = _valid_submit()
    request.files.extend(cpb.JobFile(path=f"f{i}", data=b"x") for i in range(201))
    error = await _refused(real_server, "SubmitJob", request)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert wire.status_details(error).reason == "FILES_OVER_CAP"


async def test_a_zero_max_duration_means_the_default(real_client: ControllerClient) -> None:
    request = _valid_submit()
    request.max_duration.SetInParent()
    job = await real_client._call("SubmitJob", request)
    assert job.max_duration.seconds > 0


async def test_a_stopping_controller_asks_to_retry(
    real_server: ControllerServer, real_client: ControllerClient
) -> None:
    await real_server.begin_shutdown()
    with pytest.raises(ControllerError) as caught:
        await real_client.get("j-any")
    assert (caught.value.code, caught.value.reason) == ("UNAVAILABLE", "SHUTTING_DOWN")
    assert caught.value.retry_after_s == 1.0 and "shutting down" in str(caught.value)


def test_every_reason_is_documented() -> None:
    assert all(reason.isupper() and text for reason, text in ERROR_REASONS.items())

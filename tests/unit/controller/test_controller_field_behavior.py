"""The protos say which request fields are REQUIRED (``google.api.field_behavior``), and the
controller refuses a request leaving any of them empty with a violation on each."""

from __future__ import annotations

import grpc
import pytest
from google.api import field_behavior_pb2

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.controller import ControllerServer

from .test_controller_errors import AUTH

SERVICE = cpb.DESCRIPTOR.services_by_name["Controller"]


def _required(message: object) -> list[str]:
    descriptor = message.DESCRIPTOR  # type: ignore[attr-defined]
    return [
        f.name
        for f in descriptor.fields
        if field_behavior_pb2.REQUIRED in f.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    ]


def test_the_requests_annotate_their_required_fields() -> None:
    assert _required(cpb.SubmitJobRequest()) == ["agent", "input"]
    assert _required(cpb.RejectJobRequest()) == ["id", "reason"]
    assert "id" in _required(cpb.PauseJobRequest())
    job_id = cpb.Job.DESCRIPTOR.fields_by_name["id"]
    assert field_behavior_pb2.OUTPUT_ONLY in job_id.GetOptions().Extensions[field_behavior_pb2.field_behavior]


def test_every_rpc_has_its_own_request_message() -> None:
    inputs = [m.input_type.name for m in SERVICE.methods]
    assert len(inputs) == len(set(inputs)), inputs


@pytest.mark.parametrize(
    "method", [m for m in SERVICE.methods if _required(getattr(cpb, m.input_type.name)())]
)
async def test_an_empty_required_field_is_a_violation_on_it(
    real_server: ControllerServer, method: object
) -> None:
    name = method.name  # type: ignore[attr-defined]
    request_type = getattr(cpb, method.input_type.name)  # type: ignore[attr-defined]
    async with grpc.aio.insecure_channel(str(real_server.address)) as channel:
        call = getattr(cpb_grpc.ControllerStub(channel), name)(request_type(), metadata=AUTH)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            if method.server_streaming:  # type: ignore[attr-defined]
                _ = [item async for item in call]
            else:
                await call
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
    paths = [path for path, _ in wire.status_details(caught.value).violations]
    assert paths == _required(request_type()), name

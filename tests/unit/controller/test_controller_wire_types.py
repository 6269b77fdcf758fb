"""Closed sets as enums and times as Timestamps on the controller's wire: an agent's provider,
a job's origin, a proxy event's time."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc

from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.jobs import ControllerClient, JobEvent, SandboxActivity
from airlock.jobs import event_wire as ew
from airlock.proxy import EgressEvent

from .test_controller_errors import AUTH

WHEN = datetime(2026, 11, 22, 20, 31, 5, 123000, tzinfo=UTC)


def _egress(time: str) -> JobEvent:
    event = EgressEvent(
        time=time,
        client="172.30.0.5:41234",
        phase="decision",
        method="CONNECT",
        host="example.org",
        port=443,
        allowed=False,
        rule="deny (default)",
        reason="no rule",
    )
    return JobEvent(job_id="j", seq=1, time=WHEN, data=SandboxActivity(event=event))


def test_a_proxy_time_is_a_timestamp_and_reads_back_as_the_proxy_wrote_it() -> None:
    event = _egress("2026-11-22T20:31:05.123Z")
    message = ew.event_to_proto(event)
    assert message.sandbox.egress.time.ToDatetime().replace(tzinfo=UTC) == WHEN
    assert ew.event_from_proto(message) == event


def test_a_proxy_time_that_is_not_iso_is_absent_on_the_wire() -> None:
    message = ew.event_to_proto(_egress("yesterday"))
    assert not message.sandbox.egress.HasField("time")


async def test_an_agents_provider_is_an_enum(real_client: ControllerClient, real_server: object) -> None:
    assert [a["provider"] for a in await real_client.agents()] == ["scripted"]
    async with grpc.aio.insecure_channel(real_client.address) as channel:
        response = await cpb_grpc.ControllerStub(channel).ListAgents(cpb.ListAgentsRequest(), metadata=AUTH)
    assert [a.provider for a in response.agents] == [pb.PROVIDER_KIND_SCRIPTED]

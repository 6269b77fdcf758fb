"""Every list RPC of the controller pages with opaque ``page_token``/``next_page_token``; a
token that is not one of the request's own is INVALID_ARGUMENT on ``page_token``."""

from __future__ import annotations

import grpc
import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.controller import ControllerServer
from airlock.jobs import ControllerClient

from .test_controller_errors import AUTH


async def _list(address: str, method: str, request: object) -> object:
    async with grpc.aio.insecure_channel(address) as channel:
        return await getattr(cpb_grpc.ControllerStub(channel), method)(request, metadata=AUTH)


async def test_jobs_page_until_the_last(real_server: ControllerServer, real_client: ControllerClient) -> None:
    ids = [(await real_client.submit("a", f"job {i}")).id for i in range(5)]
    seen: list[str] = []
    request = cpb.ListJobsRequest(page_size=2)
    pages = 0
    while True:
        response = await _list(str(real_server.address), "ListJobs", request)
        assert isinstance(response, cpb.ListJobsResponse)
        seen += [j.id for j in response.jobs]
        pages += 1
        if not response.next_page_token:
            break
        request.page_token = response.next_page_token
    assert seen == ids[::-1] and pages == 3


@pytest.mark.parametrize("method", ["ListJobs", "ListArtifacts", "ListAgents"])
@pytest.mark.parametrize("token", ["nonsense", "eyJ4IjogMX0", "WzEsImZmZmZmZmZmZmZmZmZmZmYiLCJ4Il0"])
async def test_a_foreign_page_token_is_invalid(
    real_server: ControllerServer,
    real_client: ControllerClient,
    method: str,
    token: str,
) -> None:
    job = await real_client.submit("a", "hi")
    request = {
        "ListJobs": cpb.ListJobsRequest(page_token=token),
        "ListArtifacts": cpb.ListArtifactsRequest(id=job.id, page_token=token),
        "ListAgents": cpb.ListAgentsRequest(page_token=token),
    }[method]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _list(str(real_server.address), method, request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [path for path, _ in wire.status_details(caught.value).violations] == ["page_token"]


async def test_a_token_with_other_filters_is_invalid(
    real_server: ControllerServer, real_client: ControllerClient
) -> None:
    for i in range(3):
        await real_client.submit("a", f"job {i}")
    first = await _list(str(real_server.address), "ListJobs", cpb.ListJobsRequest(page_size=1))
    assert isinstance(first, cpb.ListJobsResponse) and first.next_page_token
    other = cpb.ListJobsRequest(page_size=1, agent="a", page_token=first.next_page_token)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _list(str(real_server.address), "ListJobs", other)
    assert wire.status_details(caught.value).violations[0][0] == "page_token"


async def test_agents_and_artifacts_answer_one_page_without_a_token(
    real_server: ControllerServer,
    real_client: ControllerClient,
) -> None:
    agents = await _list(str(real_server.address), "ListAgents", cpb.ListAgentsRequest(page_size=1))
    assert isinstance(agents, cpb.ListAgentsResponse)
    assert [a.name for a in agents.agents] == ["a"] and agents.next_page_token == ""
    job = await real_client.submit("a", "hi")
    assert await real_client.artifacts(job.id) == []

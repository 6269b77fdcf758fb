"""Refusals carry a google.rpc.Status with typed details, read back by the standard decoder.

A real grpc.aio server (the health service's request type, one generic handler) aborts with
:func:`airlock.wire.abort_with_details`; a real channel reads the status code, the message and
every detail (ErrorInfo, BadRequest's field violations, RetryInfo) with ``grpc_status``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2

from airlock import wire

METHOD = "/test.Refuser/Refuse"


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    async def refuse(request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> None:
        if request.service == "busy":
            await wire.abort_with_details(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "the runner is busy",
                reason="BUSY",
                retry_after_s=0.5,
            )
        problems = [wire.Problem("agent.provider.kind", "must be set"), wire.Problem("input", "is required")]
        if request.service == "huge":  # echoed 50 KB values, and many problems
            problems = [wire.Problem(f"agent.tools[{i}]", f"no tool {'x' * 50_000!r}") for i in range(300)]
        await wire.abort_with_details(
            context,
            grpc.StatusCode.INVALID_ARGUMENT,
            "\n".join(map(str, problems)),
            reason="INVALID_ARGUMENT",
            problems=problems,
            metadata={"method": "Refuse"},
            trailing_metadata=(("airlock-reason", "invalid"),),
        )

    handler = grpc.unary_unary_rpc_method_handler(
        refuse,
        request_deserializer=health_pb2.HealthCheckRequest.FromString,
        response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Refuser", {"Refuse": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as chan:
            yield chan
    finally:
        await server.stop(None)


async def _call(channel: grpc.aio.Channel, service: str) -> grpc.aio.AioRpcError:
    call = channel.unary_unary(
        METHOD,
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(health_pb2.HealthCheckRequest(service=service))
    return info.value


async def test_every_problem_is_a_field_violation_with_the_reason(channel: grpc.aio.Channel) -> None:
    error = await _call(channel, "bad")
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "agent.provider.kind: must be set\ninput: is required"
    details = wire.status_details(error)
    assert details.reason == "INVALID_ARGUMENT" and details.domain == wire.DOMAIN == "airlock.dev"
    assert details.metadata == {"method": "Refuse"}
    assert details.violations == (("agent.provider.kind", "must be set"), ("input", "is required"))
    assert details.retry_after_s is None
    assert ("airlock-reason", "invalid") in tuple(error.trailing_metadata() or ())


async def test_a_retryable_refusal_says_when_to_retry(channel: grpc.aio.Channel) -> None:
    error = await _call(channel, "busy")
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    details = wire.status_details(error)
    assert details.reason == "BUSY" and details.retry_after_s == 0.5 and details.violations == ()


async def test_echoed_huge_values_and_many_problems_still_reach_the_client(channel: grpc.aio.Channel) -> None:
    """Trailers over the client's metadata limit would turn the refusal into RESOURCE_EXHAUSTED:
    each violation is cut and only as many as fit are listed, the last saying how many are not."""
    error = await _call(channel, "huge")
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    violations = wire.status_details(error).violations
    assert 1 < len(violations) < 300
    assert violations[0][0] == "agent.tools[0]" and "bytes, cut" in violations[0][1]
    assert violations[-1] == ("", f"{300 - (len(violations) - 1)} more problem(s) not listed")
    trailers = sum(len(k) + len(v) for k, v in error.trailing_metadata() or ())
    assert trailers < 8 * 1024, trailers

"""Every refusal of a real runner carries typed details (google.rpc.Status): the code, an
``ErrorInfo`` whose stable ``reason`` a client branches on (domain ``airlock.dev``), one
``BadRequest`` violation per problem of a malformed request, ``RetryInfo`` when trying again
later helps; plus the legacy ``airlock-reason`` trailer. RemoteTurn reads the reason."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.runner import RemoteTurn, RunnerCallError, RunnerConfig, RunnerServer, fence_breached
from airlock.turn import ToolStarted, TurnEvent
from layer0 import Scope, TurnError, TurnInput

from .runner_helpers import scripted_spec, text_step
from .runner_streams import HANG_GUARD_S, Runner, gated_step, open_gate, request


def legacy(error: grpc.aio.AioRpcError) -> str | None:
    return next((str(v) for k, v in error.trailing_metadata() or () if k == "airlock-reason"), None)


def check(
    error: grpc.aio.AioRpcError | None,
    code: grpc.StatusCode,
    reason: str,
    old: str,
    *,
    retry: bool = False,
) -> wire.StatusDetails:
    """Assert the code, ErrorInfo (reason, domain), RetryInfo's presence and the legacy trailer."""
    assert error is not None
    assert error.code() == code, (error.code(), error.details())
    details = wire.status_details(error)
    assert (details.reason, details.domain) == (reason, "airlock.dev")
    assert (details.retry_after_s is not None) == retry
    assert legacy(error) == old
    return details


async def refused(runner: Runner, message: pb.ExecuteRequest) -> grpc.aio.AioRpcError:
    stream = runner.execute(message)
    await stream.end()
    assert stream.error is not None, stream.kinds
    return stream.error


async def test_decoding_and_validation_problems_are_all_violations(runner: Runner) -> None:
    message = pb.ExecuteRequest(agent=wire.spec_to_proto(scripted_spec([text_step("x")])), execution_id="v")
    message.agent.name = ""  # validation
    message.agent.limits.stuck_threshold = 1  # validation (0 would mean the default)
    message.state.add(key="k", value=pb.Json(text="[1,"), scope=wire.scope_to_proto(Scope.session("s")))
    # no input: decoding; the state's JSON: decoding
    details = check(
        await refused(runner, message), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid"
    )
    assert [field for field, _ in details.violations] == [
        "agent.name",
        "agent.limits.stuck_threshold",
        "input",
        "state[0].value",
    ]
    assert all(text and "pydantic" not in text for _, text in details.violations)


async def test_a_spec_that_does_not_build_is_a_violation_at_agent(runner: Runner) -> None:
    message = request([], "bad-tool")
    message.agent.tool_options.add(tool="bash", options=wire.json_to_proto({"bogus": 1}))
    details = check(
        await refused(runner, message), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid"
    )
    assert details.violations == (
        ("agent", "invalid options for tool 'bash': bogus: Extra inputs are not permitted"),
    )


async def test_corrupt_bytes_are_one_violation(address: str, token: str) -> None:
    md = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await channel.unary_unary("/airlock.runner.v1.Runner/Cancel")(b"\xff\xff\xff", metadata=md)
    details = check(e.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid")
    assert len(details.violations) == 1 and "does not parse" in details.violations[0][1]


async def test_an_older_clients_field_at_a_reserved_number_is_a_violation(address: str, token: str) -> None:
    # CollectArtifactsRequest.max_files was an int64 at 2 (now uint32 at 5; 2 is reserved).
    body = pb.CollectArtifactsRequest(globs=["out/**"]).SerializeToString() + bytes([2 << 3, 1])
    md = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_stream("/airlock.runner.v1.Runner/CollectArtifacts")(body, metadata=md)
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for _ in call:
                pass
    details = check(e.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid")
    [(field, text)] = details.violations
    assert field == "" and text.startswith("field 2 is no longer read")


async def test_control_calls_on_unknown_executions_are_not_found(runner: Runner) -> None:
    stub, md = runner.stub, runner.metadata
    for call, message in [
        (stub.Cancel, pb.CancelRequest(execution_id="nope")),
        (stub.Pause, pb.PauseRequest(execution_id="nope")),
        (stub.Resume, pb.ResumeRequest(execution_id="nope")),
        (stub.Step, pb.StepRequest(execution_id="nope")),
        (stub.Signal, pb.SignalRequest(execution_id="nope", signal_type="s")),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await call(message, metadata=md)
        check(e.value, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", "not_found")


async def test_control_calls_without_an_execution_id_are_invalid(runner: Runner) -> None:
    stub, md = runner.stub, runner.metadata
    for call, message in [
        (stub.Cancel, pb.CancelRequest()),
        (stub.Pause, pb.PauseRequest()),
        (stub.Resume, pb.ResumeRequest()),
        (stub.Step, pb.StepRequest()),
        (stub.Signal, pb.SignalRequest(signal_type="s")),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await call(message, metadata=md)
        details = check(e.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid")
        assert details.violations == (("execution_id", "is required"),)
        assert e.value.details() == "execution_id: is required"
    # Signal reports every problem of its request at once.
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stub.Signal(pb.SignalRequest(data=pb.Json(text="{")), metadata=md)
    details = check(e.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid")
    assert [field for field, _ in details.violations] == ["execution_id", "signal_type", "data"]


async def test_refusals_about_a_running_execution(runner: Runner, workspace: Path) -> None:
    first = runner.execute(request([gated_step("go", "a")], "run"))
    await first.until("tool_started")
    # duplicate id
    check(await refused(runner, request([], "run")), grpc.StatusCode.ALREADY_EXISTS, "DUPLICATE", "duplicate")
    # busy (max_concurrent 1): retry later
    busy = check(
        await refused(runner, request([], "other")),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "BUSY",
        "busy",
        retry=True,
    )
    assert busy.violations == ()
    # Step while running
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await runner.step("run")
    check(e.value, grpc.StatusCode.FAILED_PRECONDITION, "NOT_PAUSED", "not_paused")
    # Signal: both problems at once
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await runner.stub.Signal(
            pb.SignalRequest(execution_id="run", data=pb.Json(text="{nope")), metadata=runner.metadata
        )
    signal = check(e.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid")
    assert [field for field, _ in signal.violations] == ["signal_type", "data"]
    open_gate(workspace, "go")
    assert (await first.end())[-1] == "output"


async def test_a_stopping_runner_is_unavailable_with_a_retry_delay(token: str, workspace: Path) -> None:
    server = RunnerServer(RunnerConfig(token=token, workspace=workspace, max_concurrent=2))
    client = Runner(await server.start("127.0.0.1:0"), token)
    try:
        first = client.execute(request([gated_step("go", "a")], "long"))
        await first.until("tool_started")
        stopping = asyncio.create_task(server.stop(grace=HANG_GUARD_S))
        async with asyncio.timeout(HANG_GUARD_S):
            while server._service.accepting:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        error = await refused(client, request([], "late"))
        check(error, grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", "shutdown", retry=True)
        open_gate(workspace, "go")
        await first.end()
        await stopping
    finally:
        await client.close()
        await server.stop(grace=1.0)


async def test_a_breached_fence_is_isolation(token: str, workspace: Path) -> None:
    listener = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    server = RunnerServer(
        RunnerConfig(token=token, workspace=workspace, fence=(f"127.0.0.1:{port}",), fence_timeout_s=0.5)
    )
    client = Runner(await server.start("127.0.0.1:0"), token)
    try:
        error = await refused(client, request([], "fenced"))
    finally:
        await client.close()
        await server.stop(grace=1.0)
        listener.close()
        await listener.wait_closed()
    check(error, grpc.StatusCode.FAILED_PRECONDITION, "ISOLATION", "isolation")


async def test_file_refusals(runner: Runner, workspace: Path) -> None:
    async def put(*chunks: pb.PutFilesRequest) -> grpc.aio.AioRpcError:
        async def stream() -> AsyncIterator[pb.PutFilesRequest]:
            for chunk in chunks:
                yield chunk

        with pytest.raises(grpc.aio.AioRpcError) as e:
            await runner.stub.PutFiles(stream(), metadata=runner.metadata)
        return e.value

    bad = check(
        await put(pb.PutFilesRequest(path="../x", data=b"1", last=True)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
        "invalid",
    )
    assert [field for field, _ in bad.violations] == ["path"]
    big = [pb.PutFilesRequest(path=f"f{i}", data=b"x" * 500_000, last=True) for i in range(20)]
    check(await put(*big), grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_LARGE", "too_large")

    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in runner.stub.CollectArtifacts(
            pb.CollectArtifactsRequest(globs=["../out/**"]), metadata=runner.metadata
        ):
            pass
    globs = check(e.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid")
    assert [field for field, _ in globs.violations] == ["globs"]


async def test_remote_turn_reads_the_reason(address: str, token: str, workspace: Path) -> None:
    spec = scripted_spec([gated_step("go", "a"), text_step("x")], ["bash"])
    started = asyncio.Event()

    async def sink(event: TurnEvent) -> None:
        if isinstance(event, ToolStarted):
            started.set()

    async with RemoteTurn(address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("go"), events=sink))
        await asyncio.wait_for(started.wait(), HANG_GUARD_S)
        with pytest.raises(RunnerCallError) as e:
            await turn.step()
        assert (e.value.code, e.value.reason) == ("FAILED_PRECONDITION", "NOT_PAUSED")
        open_gate(workspace, "go")
        await asyncio.wait_for(task, HANG_GUARD_S)


def test_an_older_runners_trailer_is_read_when_there_are_no_details() -> None:
    error = grpc.aio.AioRpcError(
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(("airlock-reason", "isolation")),
        details="this sandbox reached 10.0.0.1:80",
    )
    failure = TurnError.non_retryable("refused")
    failure.__cause__ = error
    assert fence_breached(failure) == "this sandbox reached 10.0.0.1:80"

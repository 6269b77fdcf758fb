"""The runner over real gRPC (loopback and unix sockets): execute, control, auth, limits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from airlock.build import build_turn
from airlock.runner import (
    SERVICE_NAME,
    RemoteTurn,
    RunnerCallError,
    RunnerConfig,
    RunnerServer,
    TurnFinished,
)
from airlock.state import InMemoryStore
from airlock.turn import (
    Checkpoint,
    InferenceFinished,
    InferenceStarted,
    LifecycleEvent,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnPaused,
    TurnStarted,
)
from layer0 import ExitReason, Scope, TurnError, TurnInput, TurnOutput, WriteMemory, read_only

from .runner_helpers import scripted_spec, text_step, tool_step

CALC_SCRIPT = [
    tool_step("calculator", {"expression": "6*7"}, text="Let me compute."),
    tool_step("write_file", {"path": "answer.txt", "content": "42"}, use_id="t2"),
    text_step("The answer is 42."),
]


def _no_durations(value: Any) -> Any:
    """A TurnOutput / event with every duration zeroed (they differ run to run)."""
    if isinstance(value, TurnOutput):
        metadata = value.metadata.model_copy(
            update={
                "duration": 0,
                "tools_called": [r.model_copy(update={"duration": 0}) for r in value.metadata.tools_called],
            }
        )
        return value.model_copy(update={"metadata": metadata})
    if hasattr(value, "duration_ms"):
        return value.model_copy(update={"duration_ms": 0})
    if isinstance(value, Checkpoint):
        state = {**value.state, "elapsed_ms": 0}
        state["tool_records"] = [{**r, "duration": 0} for r in state["tool_records"]]  # type: ignore[dict-item, union-attr]
        state["completed"] = [{**c, "duration_ms": 0} for c in state["completed"]]  # type: ignore[dict-item, union-attr]
        return value.model_copy(update={"state": state})
    return value


async def _in_process(
    spec: Any, input: TurnInput, workspace: Path, state: list[Any]
) -> tuple[TurnOutput, list[Any]]:
    store = InMemoryStore()
    for scope, key, value in state:
        await store.write(scope, key, value)
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    turn = build_turn(spec, state=read_only(store), workspace=workspace, events=sink)
    output = await turn.execute(input)
    return output, events


def _reason(error: grpc.aio.AioRpcError) -> str | None:
    """The ``airlock-reason`` trailing metadata of a refused call."""
    return next((str(v) for k, v in error.trailing_metadata() or () if k == "airlock-reason"), None)


# --- execute ---------------------------------------------------------------------------------


async def test_execute_end_to_end_matches_in_process(
    address: str, token: str, workspace: Path, tmp_path: Path
) -> None:
    spec = scripted_spec(CALC_SCRIPT, tools=["calculator", "write_file"])
    state = [(Scope.session("s1"), "note", {"n": 1, "f": 1.5})]
    input = TurnInput.new("What is 6*7? Save it.", session="s1", metadata={"trace": "abc", "n": 3})
    remote_events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        remote_events.append(event)

    async with RemoteTurn(address, token, spec, state=state) as turn:
        output = await turn.execute(input, events=sink)
    assert (workspace / "answer.txt").read_text() == "42"

    local_ws = tmp_path / "local-ws"
    local_ws.mkdir()
    local_output, local_events = await _in_process(spec, input, local_ws, state)
    assert _no_durations(output) == _no_durations(local_output)
    assert [_no_durations(e) for e in remote_events] == [_no_durations(e) for e in local_events]

    assert output.exit_reason == ExitReason.complete()
    assert output.message.as_text() == "The answer is 42."
    assert [r.name for r in output.metadata.tools_called] == ["calculator", "write_file"]
    assert output.metadata.tokens_in == 7 + 7 + 10
    assert str(output.metadata.cost) == "0.002000"
    assert any(isinstance(e, WriteMemory) for e in output.effects)  # the history to persist

    kinds = [type(e) for e in remote_events]
    assert kinds[0] is TurnStarted
    assert kinds[1:9] == [
        Checkpoint,
        InferenceStarted,
        InferenceFinished,
        LifecycleEvent,  # the call's cost
        Checkpoint,
        ToolStarted,
        ToolFinished,
        Checkpoint,
    ]
    finished = [e for e in remote_events if isinstance(e, ToolFinished)]
    assert finished[0].output == "42" and finished[0].success


async def test_events_iterator_ends_with_the_output(address: str, token: str) -> None:
    turn = RemoteTurn(address, token, scripted_spec([text_step("hi")]))
    seen = [event async for event in turn.events(TurnInput.new("hello"))]
    assert isinstance(seen[0], TurnStarted)
    assert isinstance(seen[-1], TurnFinished)
    assert seen[-1].output.message.as_text() == "hi"
    await turn.close()


async def test_execute_over_a_unix_socket(token: str, workspace: Path, tmp_path: Path) -> None:
    sock = tmp_path / "runner.sock"
    async with RunnerServer(RunnerConfig(token=token, workspace=workspace)) as server:
        await server.start(f"unix:{sock}")
        async with RemoteTurn(f"unix:{sock}", token, scripted_spec([text_step("via unix")])) as turn:
            assert await turn.health() == "SERVING"
            output = await turn.execute(TurnInput.new("hi"))
    assert output.message.as_text() == "via unix"


async def test_turn_errors_keep_their_kind(address: str, token: str) -> None:
    # The script expects no tools offered; an extra request exhausts it: non_retryable.
    turn = RemoteTurn(
        address, token, scripted_spec([tool_step("calculator", {"expression": "1+1"})], ["calculator"])
    )
    with pytest.raises(TurnError) as e:
        await turn.execute(TurnInput.new("go"))
    assert e.value.kind == "non_retryable"
    assert "script exhausted" in e.value.message
    await turn.close()


async def test_a_second_execution_on_the_same_turn_works(address: str, token: str) -> None:
    async with RemoteTurn(address, token, scripted_spec([text_step("again")])) as turn:
        first = await turn.execute(TurnInput.new("1"))
        second = await turn.execute(TurnInput.new("2"))
    assert first.message == second.message


# --- cancel, pause, step, resume ---------------------------------------------------------------


async def _wait_for(events: list[TurnEvent], kind: type) -> None:
    """Poll the collected events (filled by a sink callback) until one of ``kind`` arrived."""
    async with asyncio.timeout(5):
        while not any(isinstance(e, kind) for e in events):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_cancel_stops_the_turn_with_partial_metadata(address: str, token: str, workspace: Path) -> None:
    spec = scripted_spec(
        [tool_step("bash", {"command": "sleep 30; touch never.txt"}), text_step("unreachable")], ["bash"]
    )
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("sleep"), events=sink))
        await _wait_for(events, ToolStarted)
        await turn.cancel()
        output = await asyncio.wait_for(task, 5)
        assert output.exit_reason == ExitReason.custom("cancelled")
        assert output.metadata.tokens_in == 7  # the one model call made before the cancel
        assert output.metadata.turns_used >= 1
        with pytest.raises(RunnerCallError) as e:
            await turn.cancel()  # already ended
        assert e.value.code == "NOT_FOUND"
    assert not (workspace / "never.txt").exists()


async def test_pause_step_resume(address: str, token: str) -> None:
    script = [
        tool_step("bash", {"command": "sleep 0.3; echo a"}, use_id="a"),
        tool_step("bash", {"command": "echo b"}, use_id="b"),
        tool_step("bash", {"command": "echo c"}, use_id="c"),
        text_step("done"),
    ]
    spec = scripted_spec(script, ["bash"])
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec, execution_id="ex-1") as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("count"), events=sink))
        await _wait_for(events, ToolStarted)  # the first step is running (its tool sleeps)
        await turn.pause()
        await _wait_for(events, TurnPaused)
        calls_when_paused = sum(isinstance(e, InferenceStarted) for e in events)
        await asyncio.sleep(0.2)
        assert sum(isinstance(e, InferenceStarted) for e in events) == calls_when_paused  # really paused

        info = await turn.step()
        assert not info.complete and info.tools == ["bash"]
        assert sum(isinstance(e, InferenceStarted) for e in events) == calls_when_paused + 1
        await asyncio.sleep(0.2)
        assert sum(isinstance(e, InferenceStarted) for e in events) == calls_when_paused + 1  # still paused

        await turn.resume()
        output = await asyncio.wait_for(task, 5)
        assert output.message.as_text() == "done"
        assert output.exit_reason == ExitReason.complete()
        assert [r.name for r in output.metadata.tools_called] == ["bash"] * 3

    # The same result as an uninterrupted run.
    async with RemoteTurn(address, token, spec) as straight:
        plain = await straight.execute(TurnInput.new("count"))
    assert _no_durations(plain) == _no_durations(output)


async def test_step_requires_a_paused_execution(address: str, token: str) -> None:
    spec = scripted_spec([tool_step("bash", {"command": "sleep 30"}), text_step("x")], ["bash"])
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("go"), events=sink))
        await _wait_for(events, ToolStarted)
        with pytest.raises(RunnerCallError) as e:
            await turn.step()
        assert e.value.code == "FAILED_PRECONDITION"
        await turn.cancel()
        await task


async def test_stepping_to_completion(address: str, token: str) -> None:
    spec = scripted_spec([tool_step("bash", {"command": "sleep 0.3"}), text_step("two")], ["bash"])
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("go"), events=sink))
        await _wait_for(events, ToolStarted)
        await turn.pause()
        await _wait_for(events, TurnPaused)
        infos = []
        while not task.done():
            infos.append(await turn.step())
            if infos[-1].complete:
                break
        output = await asyncio.wait_for(task, 5)
    assert infos[-1].complete and infos[-1].text == "two"
    assert output.message.as_text() == "two"


async def test_control_calls_on_unknown_executions(address: str, token: str) -> None:
    channel = grpc.aio.insecure_channel(address)
    stub = pb_grpc.RunnerStub(channel)
    md = (("authorization", f"Bearer {token}"),)
    for call, request in [
        (stub.Cancel, pb.CancelRequest(execution_id="nope")),
        (stub.Pause, pb.PauseRequest(execution_id="nope")),
        (stub.Resume, pb.ResumeRequest(execution_id="nope")),
        (stub.Step, pb.StepRequest(execution_id="nope")),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await call(request, metadata=md)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
    await channel.close()


# --- auth ------------------------------------------------------------------------------------


async def test_missing_or_wrong_token_is_unauthenticated(address: str, token: str) -> None:
    channel = grpc.aio.insecure_channel(address)
    stub = pb_grpc.RunnerStub(channel)
    request = pb.ExecuteRequest(
        agent=wire.spec_to_proto(scripted_spec([text_step("x")])),
        input=wire.input_to_proto(TurnInput.new("hi")),
    )
    for metadata in [(), (("authorization", "Bearer wrong-token-wrong-token"),), (("authorization", token),)]:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for _ in stub.Execute(request, metadata=metadata):
                pass
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert token not in str(e.value.details())
        with pytest.raises(grpc.aio.AioRpcError) as e2:
            await stub.Cancel(pb.CancelRequest(execution_id="x"), metadata=metadata)
        assert e2.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # Health needs no token.
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", SERVICE_NAME):
        response = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert response.status == health_pb2.HealthCheckResponse.SERVING
    await channel.close()


async def test_remote_turn_with_a_wrong_token(address: str) -> None:
    async with RemoteTurn(address, "not-the-token-at-all", scripted_spec([text_step("x")])) as turn:
        with pytest.raises(TurnError) as e:
            await turn.execute(TurnInput.new("hi"))
    assert e.value.kind == "non_retryable" and "UNAUTHENTICATED" in e.value.message


def test_the_runner_refuses_to_start_without_a_token(workspace: Path) -> None:
    with pytest.raises(Exception, match="without a token"):
        RunnerConfig(token="", workspace=workspace)


# --- limits and malformed requests -------------------------------------------------------------


async def test_oversized_request_is_resource_exhausted_and_the_runner_stays_up(
    address: str, token: str
) -> None:
    big = TurnInput.new("x" * (2 * 1024 * 1024))  # the fixture's limit is 1 MiB
    async with RemoteTurn(address, token, scripted_spec([text_step("ok")])) as turn:
        with pytest.raises(TurnError) as e:
            await turn.execute(big)
        assert e.value.kind == "non_retryable"
        assert "RESOURCE_EXHAUSTED" in e.value.message and "larger than max" in e.value.message
        assert (await turn.execute(TurnInput.new("small"))).message.as_text() == "ok"


async def test_oversized_output_becomes_a_clear_error(address: str, token: str) -> None:
    # The tool result (1.1 MB) ends up in the history effect of the output.
    spec = scripted_spec(
        [tool_step("bash", {"command": "head -c 1100000 /dev/zero | tr '\\0' y"}), text_step("done")],
        ["bash"],
        tool_options={"bash": {"max_output_bytes": 2_000_000}},
    )
    async with RemoteTurn(address, token, spec) as turn:
        with pytest.raises(TurnError) as e:
            await turn.execute(TurnInput.new("big answer please", session="s-big"))
    assert e.value.kind == "non_retryable" and "message limit" in e.value.message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda r: r.agent.provider.__setattr__("kind", 99),
            "agent.provider.kind: unknown provider kind 99; valid: PROVIDER_KIND_ANTHROPIC, "
            "PROVIDER_KIND_OPENAI_COMPAT, PROVIDER_KIND_SCRIPTED, PROVIDER_KIND_COMMAND",
        ),
        (lambda r: r.agent.tools.append("rm_rf"), "agent.tools: unknown tool(s) rm_rf; valid tools: bash,"),
        (lambda r: r.agent.__setattr__("name", ""), "agent.name: String should have at least 1 character"),
        (lambda r: r.input.message.__setattr__("text", ""), "input.message: empty"),
        (lambda r: r.ClearField("input"), "input: required"),
        (lambda r: r.ClearField("agent"), "agent: required"),
        (lambda r: r.input.metadata.__setattr__("text", "{not json"), "input.metadata: invalid JSON text"),
        (lambda r: r.state.add(key="k"), "state[0].scope: required"),
        (lambda r: r.agent.provider.ClearField("script"), "agent: scripted provider needs a script"),
        (
            lambda r: r.agent.tool_options.add(tool="bash", options=wire.json_to_proto({"bogus": 1})),
            "agent: invalid options for tool 'bash': bogus: Extra inputs are not permitted",
        ),
    ],
)
async def test_malformed_requests_are_invalid_argument(
    address: str, token: str, mutate: Any, expected: str
) -> None:
    spec = scripted_spec([text_step("x")], tools=["bash"])
    request = pb.ExecuteRequest(
        agent=wire.spec_to_proto(spec), input=wire.input_to_proto(TurnInput.new("hi")), execution_id="m"
    )
    mutate(request)
    channel = grpc.aio.insecure_channel(address)
    stub = pb_grpc.RunnerStub(channel)
    md = (("authorization", f"Bearer {token}"),)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in stub.Execute(request, metadata=md):
            pass
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert str(e.value.details()).startswith(expected)
    assert _reason(e.value) == "invalid"
    # The runner stays up and serves the next request.
    good = pb.ExecuteRequest(
        agent=wire.spec_to_proto(scripted_spec([text_step("fine")])), input=request.input
    )
    if not request.HasField("input") or not request.input.message.text:
        good.input.CopyFrom(wire.input_to_proto(TurnInput.new("hi")))
    if request.input.metadata.text == "{not json":
        good.input.metadata.text = "null"
    finals = [m async for m in stub.Execute(good, metadata=md)]
    assert finals[-1].WhichOneof("kind") == "output"
    await channel.close()


async def test_every_problem_of_a_request_is_one_line_without_python_details(
    address: str, token: str
) -> None:
    request = pb.ExecuteRequest(
        agent=wire.spec_to_proto(scripted_spec([text_step("x")])), execution_id="lines"
    )
    request.agent.name = ""
    request.agent.limits.stuck_threshold = 1
    request.state.add(key="k", value=pb.Json(text="[1,"), scope=wire.scope_to_proto(Scope.session("s")))
    md = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.RunnerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for _ in stub.Execute(request, metadata=md):
                pass
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        lines = str(e.value.details()).splitlines()
        assert [line.split(": ")[0] for line in lines] == [
            "agent.name",
            "agent.limits.stuck_threshold",
            "input",
            "state[0].value",
        ]
        # A script that does not validate: one line per problem, no pydantic URL or class name.
        bad_script = scripted_spec([text_step("x")])
        bad = pb.ExecuteRequest(
            agent=wire.spec_to_proto(bad_script), input=wire.input_to_proto(TurnInput.new("hi"))
        )
        bad.agent.provider.script.text = '[{"response": {"content": [], "stop_reason": "bored"}, "extra": 1}]'
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for _ in stub.Execute(bad, metadata=md):
                pass
        details = str(e.value.details())
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert details.splitlines() == [
            "agent: invalid inline script: steps[0].response.stop_reason: Input should be 'end_turn', "
            "'tool_use', 'max_tokens', 'stop_sequence', 'pause_turn', 'refusal', "
            "'model_context_window_exceeded', 'content_filter' or 'compaction'",
            "agent: invalid inline script: steps[0].extra: Extra inputs are not permitted",
        ]
        assert "pydantic" not in details and "Script" not in details


@pytest.mark.parametrize(
    ("method", "streaming"),
    [
        ("/airlock.runner.v1.Runner/Execute", True),
        ("/airlock.runner.v1.Runner/Cancel", False),
        ("/airlock.runner.v1.Runner/Step", False),
    ],
)
async def test_corrupt_request_bytes_are_invalid_argument(
    address: str, token: str, method: str, streaming: bool
) -> None:
    md = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        for corrupt in (b"\xff\xff\xff", b"\x0a\x05ab"):  # a bad tag; a field cut short
            with pytest.raises(grpc.aio.AioRpcError) as e:
                if streaming:
                    async for _ in channel.unary_stream(method)(corrupt, metadata=md):
                        pass
                else:
                    await channel.unary_unary(method)(corrupt, metadata=md)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "does not parse as its protobuf message" in str(e.value.details())
            assert "DecodeError" not in str(e.value.details()) and "<class" not in str(e.value.details())
            assert _reason(e.value) == "invalid"
        # Without the token, the same bytes are UNAUTHENTICATED: auth comes first.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await channel.unary_unary("/airlock.runner.v1.Runner/Cancel")(b"\xff\xff")
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # The runner still serves well-formed calls.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await pb_grpc.RunnerStub(channel).Cancel(pb.CancelRequest(execution_id="x"), metadata=md)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_second_concurrent_execute_is_resource_exhausted(address: str, token: str) -> None:
    slow = scripted_spec([tool_step("bash", {"command": "sleep 30"}), text_step("x")], ["bash"])
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(address, token, slow) as first, RemoteTurn(address, token, slow) as second:
        task = asyncio.create_task(first.execute(TurnInput.new("1"), events=sink))
        await _wait_for(events, ToolStarted)
        with pytest.raises(TurnError) as e:
            await second.execute(TurnInput.new("2"))
        assert e.value.kind == "retryable"  # busy: a retry later may succeed
        assert "RESOURCE_EXHAUSTED" in e.value.message and "busy" in e.value.message
        await first.cancel()
        assert (await task).exit_reason == ExitReason.custom("cancelled")
    # Now there is room again.
    async with RemoteTurn(address, token, scripted_spec([text_step("room")])) as third:
        assert (await third.execute(TurnInput.new("3"))).message.as_text() == "room"


async def test_max_concurrent_allows_parallel_executions(token: str, workspace: Path) -> None:
    config = RunnerConfig(token=token, workspace=workspace, max_concurrent=2)
    async with RunnerServer(config) as server:
        address = await server.start("127.0.0.1:0")
        spec = scripted_spec([tool_step("bash", {"command": "sleep 0.3"}), text_step("ok")], ["bash"])
        turns = [RemoteTurn(address, token, spec) for _ in range(2)]
        outputs = await asyncio.gather(*(t.execute(TurnInput.new("go")) for t in turns))
        assert [o.message.as_text() for o in outputs] == ["ok", "ok"]
        for t in turns:
            await t.close()


async def test_connection_loss_is_retryable(tmp_path: Path) -> None:
    turn = RemoteTurn(
        f"unix:{tmp_path / 'nobody.sock'}", "some-token-some-token", scripted_spec([text_step("x")])
    )
    with pytest.raises(TurnError) as e:
        await turn.execute(TurnInput.new("hi"))
    assert e.value.kind == "retryable" and "UNAVAILABLE" in e.value.message
    await turn.close()


async def test_server_stop_mid_turn_ends_it_with_a_retryable_error(token: str, workspace: Path) -> None:
    server = RunnerServer(RunnerConfig(token=token, workspace=workspace))
    address = await server.start("127.0.0.1:0")
    spec = scripted_spec([tool_step("bash", {"command": "sleep 30"}), text_step("x")], ["bash"])
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("go"), events=sink))
        await _wait_for(events, ToolStarted)
        stopping = asyncio.create_task(server.stop(grace=0.5))
        await asyncio.sleep(0.05)
        assert await turn.health() == "NOT_SERVING"
        with pytest.raises(TurnError) as e:  # nobody cancelled it: the sandbox is going away
            await asyncio.wait_for(task, 5)
        await stopping
    assert e.value.kind == "retryable"
    assert (
        "runner was stopped (SIGTERM) during the turn, after 1 model call(s), 0 finished tool call(s)"
        in str(e.value)
    )

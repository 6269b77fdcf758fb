"""Bad input for the runner's gRPC service, fuzzed with hypothesis against a real in-process
``RunnerServer`` (its own event loop on a thread, served on 127.0.0.1, called with plain
gRPC channels).

Fuzzed: random bytes as the raw request body of every Runner method; well-formed requests
carrying enum values no version defines (provider kind, context strategy); huge strings;
JSON fields (input metadata, state values, tool/hook options, the scripted script) holding
deep nesting, non-JSON text, NaN and numbers too long to parse; requests above the server's
message limit; a missing, wrong or malformed bearer token.

Expected: every refusal is a clear status (never UNKNOWN or INTERNAL) with a non-empty
message, matching what the protocol documents (a body that does not parse:
INVALID_ARGUMENT with ``airlock-reason: invalid``; a bad token: UNAUTHENTICATED; an
oversized request: RESOURCE_EXHAUSTED); no call runs into its deadline (that would be a
hang); nothing runs for a refused request; and the runner still answers a health check and
runs a valid turn afterwards. Model providers are replaced by a scripted one, so no request
ever leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.providers import create_provider
from airlock.runner import RunnerConfig, RunnerServer
from airlock.spec import AgentSpec, ProviderSpec
from layer0 import TurnInput

pytestmark = [
    pytest.mark.attack("fuzz"),
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
FEW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
#: A refusal the client can act on. UNKNOWN or INTERNAL would be an unhandled server error;
#: DEADLINE_EXCEEDED a hang.
CLEAR = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
}
DEADLINE_S = 10.0
MAX_MESSAGE = 1024 * 1024
SERVICE = "/airlock.runner.v1.Runner/"
#: Each method, whether it streams its answer, and its request message.
METHODS: dict[str, tuple[bool, Any]] = {
    "Execute": (True, pb.ExecuteRequest),
    "Cancel": (False, pb.CancelRequest),
    "Pause": (False, pb.PauseRequest),
    "Resume": (False, pb.ResumeRequest),
    "Step": (False, pb.StepRequest),
}
SCRIPT = [{"response": {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}}]


@dataclass
class Runner:
    server: RunnerServer
    address: str
    token: str
    workspace: Path
    outside: Path
    channel: grpc.Channel

    def auth(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)


@dataclass
class Answer:
    code: grpc.StatusCode
    details: str
    trailing: dict[str, str]
    responses: list[bytes]


def _offline_provider(spec: AgentSpec) -> Any:
    """The spec's own scripted provider, or a scripted one in place of a real model."""
    if spec.provider.kind == "scripted":
        return create_provider(spec.provider)
    return create_provider(ProviderSpec(kind="scripted", script=SCRIPT))


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    root = tmp_path_factory.mktemp("fuzz-runner")
    workspace = root / "workspace"
    workspace.mkdir()
    outside = root / "outside.txt"
    outside.write_text("untouched")
    token = secrets.token_urlsafe(32)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    async def make() -> RunnerServer:
        return RunnerServer(
            RunnerConfig(
                token=token,
                workspace=workspace,
                max_message_bytes=MAX_MESSAGE,
                provider_factory=_offline_provider,
            )
        )

    server = run(make())
    address = run(server.start("127.0.0.1:0"))
    options = [("grpc.max_send_message_length", 8 * MAX_MESSAGE)]
    channel = grpc.insecure_channel(address, options=options)
    try:
        yield Runner(server, address, token, workspace, outside, channel)
    finally:
        channel.close()
        run(server.stop(grace=1.0))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _call(runner: Runner, method: str, body: bytes, metadata: Any = None) -> Answer:
    """Send ``body`` as the raw request of ``method``; the status, details and answers."""
    streaming = METHODS[method][0]
    metadata = runner.auth() if metadata is None else metadata
    path = SERVICE + method
    responses: list[bytes] = []
    if streaming:
        stub = runner.channel.unary_stream(path, request_serializer=None, response_deserializer=None)
        call = stub(body, timeout=DEADLINE_S, metadata=metadata)
        try:
            for item in call:
                responses.append(item)
        except grpc.RpcError:
            pass
        code, details, trailing = call.code(), call.details() or "", call.trailing_metadata() or ()
    else:
        unary = runner.channel.unary_unary(path, request_serializer=None, response_deserializer=None)
        try:
            response, call = unary.with_call(body, timeout=DEADLINE_S, metadata=metadata)
            responses.append(response)
        except grpc.RpcError as e:
            call = e  # type: ignore[assignment]
        code, details, trailing = call.code(), call.details() or "", call.trailing_metadata() or ()
    assert code != grpc.StatusCode.DEADLINE_EXCEEDED, f"{method} hung on {body[:80]!r}"
    return Answer(code, details, {k: str(v) for k, v in trailing}, responses)


def _assert_clear(answer: Answer) -> None:
    assert answer.code in CLEAR, f"unclear status {answer.code}: {answer.details}"
    assert answer.details.strip(), f"{answer.code} without a message"


def _assert_turn_ended(answer: Answer) -> None:
    """An OK Execute stream ends with exactly one ``output`` or ``error`` event."""
    assert answer.code == grpc.StatusCode.OK
    kinds = [pb.TurnEvent.FromString(r).WhichOneof("kind") for r in answer.responses]
    assert kinds and kinds[-1] in ("output", "error"), kinds
    assert sum(k in ("output", "error") for k in kinds) == 1


def _assert_serving(runner: Runner) -> None:
    health = health_pb2_grpc.HealthStub(runner.channel)
    reply = health.Check(
        health_pb2.HealthCheckRequest(service="airlock.runner.v1.Runner"), timeout=DEADLINE_S
    )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert runner.server.executions == 0
    assert runner.outside.read_text() == "untouched"


def _valid_request(**spec_extra: Any) -> pb.ExecuteRequest:
    spec = AgentSpec(name="fuzz", provider=ProviderSpec(kind="scripted", script=SCRIPT), **spec_extra)
    return pb.ExecuteRequest(
        agent=wire.spec_to_proto(spec), input=wire.input_to_proto(TurnInput.new("hello")), execution_id=""
    )


def _assert_runs_a_valid_turn(runner: Runner) -> None:
    answer = _call(runner, "Execute", _valid_request().SerializeToString())
    _assert_turn_ended(answer)
    last = pb.TurnEvent.FromString(answer.responses[-1])
    assert last.WhichOneof("kind") == "output"
    assert wire.output_from_proto(last.output).message.as_text() == "ok"
    _assert_serving(runner)


def _parses(message_type: Any, body: bytes) -> bool:
    try:
        message_type.FromString(body)
    except Exception:
        return False
    return True


# --- random bytes ----------------------------------------------------------------------------


def _mutations(base: bytes) -> st.SearchStrategy[bytes]:
    """``base`` with a byte flipped, a cut, or random bytes inserted."""

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        data = bytearray(base)
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, max(0, len(data) - 1)))
            how = draw(st.sampled_from(["flip", "cut", "insert"]))
            if how == "flip" and data:
                data[at] ^= draw(st.integers(1, 255))
            elif how == "cut":
                del data[at:]
            else:
                data[at:at] = draw(st.binary(min_size=1, max_size=16))
        return bytes(data)

    return mutate()


BODIES = st.one_of(
    st.binary(max_size=512),
    st.binary(min_size=1, max_size=4096),
    _mutations(_valid_request().SerializeToString()),
)


@FUZZ
@given(method=st.sampled_from(sorted(METHODS)), body=BODIES)
def test_random_bytes_get_a_clear_answer(runner: Runner, method: str, body: bytes) -> None:
    answer = _call(runner, method, body)
    message_type = METHODS[method][1]
    if not _parses(message_type, body):
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert "does not parse" in answer.details
        assert answer.trailing.get("airlock-reason") == "invalid"
    elif method != "Execute" and not message_type.FromString(body).execution_id:
        # Parses, but names no execution: its id is required.
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert answer.details.startswith("execution_id: is required")
        assert answer.trailing.get("airlock-reason") == "invalid"
    elif method != "Execute":
        # Parses, but names no running execution.
        assert answer.code == grpc.StatusCode.NOT_FOUND, (answer.code, answer.details)
        assert answer.trailing.get("airlock-reason") == "not_found"
    if answer.code == grpc.StatusCode.OK:
        assert method == "Execute"
        _assert_turn_ended(answer)
    else:
        _assert_clear(answer)
    _assert_serving(runner)


def test_random_bytes_leave_the_runner_serving(runner: Runner) -> None:
    _assert_runs_a_valid_turn(runner)


# --- enums no version defines ----------------------------------------------------------------

UNKNOWN_PROVIDER = st.integers(-(2**31), 2**31 - 1).filter(lambda v: v not in range(1, 5))
UNKNOWN_STRATEGY = st.integers(-(2**31), 2**31 - 1).filter(lambda v: v not in range(1, 5))


@FUZZ
@given(kind=UNKNOWN_PROVIDER, strategy=st.none() | UNKNOWN_STRATEGY)
def test_unknown_enum_values_are_invalid_argument(runner: Runner, kind: int, strategy: int | None) -> None:
    request = _valid_request()
    request.agent.provider.kind = kind  # type: ignore[assignment]
    if strategy is not None:
        request.agent.context.strategy = strategy  # type: ignore[assignment]
    answer = _call(runner, "Execute", request.SerializeToString())
    assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
    assert answer.trailing.get("airlock-reason") == "invalid"
    lines = answer.details.splitlines()
    assert any(line.startswith("agent.provider.kind:") for line in lines), answer.details
    if strategy is not None:
        assert any(line.startswith("agent.context.strategy:") for line in lines), answer.details
    _assert_serving(runner)


# --- huge strings ----------------------------------------------------------------------------

HUGE = st.builds(
    lambda unit, n: unit * n,
    st.sampled_from(["a", "é", "\U0001f600", "\x00", "../", "\n"]),
    st.integers(50_000, 200_000),
)


@FEW
@given(field=st.sampled_from(["name", "system", "message", "tool", "session", "execution_id"]), text=HUGE)
# A name just under the request limit: its lifecycle events (which carry the agent) used to
# exceed the response limit and end the stream RESOURCE_EXHAUSTED.
@example(field="name", text="\U0001f600" * 131063)
def test_huge_strings_get_an_answer_in_time(runner: Runner, field: str, text: str) -> None:
    request = _valid_request()
    if field == "name":
        request.agent.name = text
    elif field == "system":
        request.agent.system = text
    elif field == "message":
        request.input.message.text = text
    elif field == "tool":
        request.agent.tools.append(text)
    elif field == "session":
        request.input.session = text
    else:
        request.execution_id = text
    answer = _call(runner, "Execute", request.SerializeToString())
    if answer.code == grpc.StatusCode.OK:
        _assert_turn_ended(answer)
    else:
        _assert_clear(answer)
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT
    if field == "tool":  # no tool of that name
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "agent.tools" in answer.details
        assert answer.trailing.get("airlock-reason") == "invalid"
    _assert_serving(runner)


@FEW
@given(method=st.sampled_from(["Cancel", "Pause", "Resume", "Step"]), execution_id=HUGE)
def test_huge_execution_ids_get_a_readable_not_found(runner: Runner, method: str, execution_id: str) -> None:
    body = METHODS[method][1](execution_id=execution_id).SerializeToString()
    answer = _call(runner, method, body)
    assert answer.code == grpc.StatusCode.NOT_FOUND, (answer.code, answer.details)
    assert answer.trailing.get("airlock-reason") == "not_found"
    assert answer.details.startswith("no running execution")
    assert len(answer.details.encode()) < 4096  # cut, so every client can read it
    _assert_serving(runner)


# --- hostile JSON ----------------------------------------------------------------------------


def _nested(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


@st.composite
def hostile_json(draw: st.DrawFn) -> tuple[str, bool]:
    """JSON text and whether the wire must refuse it whatever field carries it."""
    how = draw(st.sampled_from(["deep", "deep-unclosed", "garbage", "constant", "long-int", "shallow"]))
    if how == "deep":
        depth = draw(st.integers(65, 20_000))
        return _nested(depth, draw(st.sampled_from(["array", "object"]))), True
    if how == "deep-unclosed":
        return "[" * draw(st.integers(65, 50_000)), True
    if how == "garbage":
        text = draw(st.text(min_size=1, max_size=64))
        try:
            json.loads(text)
        except ValueError:
            return text, True
        return text, False
    if how == "constant":
        return draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "[NaN]", '{"x": Infinity}'])), True
    if how == "long-int":
        return "9" * draw(st.integers(5_000, 100_000)), True
    depth = draw(st.integers(1, 64))
    return _nested(depth, draw(st.sampled_from(["array", "object"]))), False


JSON_FIELDS = [
    "input.metadata",
    "state[0].value",
    "agent.tool_options",
    "agent.hooks",
    "agent.provider.script",
]


@FUZZ
@given(field=st.sampled_from(JSON_FIELDS), value=hostile_json())
def test_hostile_json_is_refused_with_its_path(runner: Runner, field: str, value: tuple[str, bool]) -> None:
    text, must_refuse = value
    request = _valid_request()
    if field == "input.metadata":
        request.input.metadata.text = text
    elif field == "state[0].value":
        entry = request.state.add(key="k", value=pb.Json(text=text))
        entry.scope.session = "s"
    elif field == "agent.tool_options":
        request.agent.tools.append("calculator")
        request.agent.tool_options.add(tool="calculator", options=pb.Json(text=text))
    elif field == "agent.hooks":
        request.agent.hooks.add(kind=pb.HOOK_KIND_LOGGING, options=pb.Json(text=text))
    else:
        request.agent.provider.script.text = text
    answer = _call(runner, "Execute", request.SerializeToString())
    if answer.code == grpc.StatusCode.OK:
        assert not must_refuse, f"{field} accepted {text[:60]!r}"
        _assert_turn_ended(answer)
    else:
        _assert_clear(answer)
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT
        root = field.split("[")[0].split(".")[0]
        assert all(line.startswith(root) for line in answer.details.splitlines()), answer.details
        if must_refuse and field in ("input.metadata", "state[0].value"):
            assert field.split(".")[0].split("[")[0] in answer.details
    _assert_serving(runner)


# --- oversized -------------------------------------------------------------------------------


@settings(FEW, max_examples=12)
@given(
    method=st.sampled_from(sorted(METHODS)),
    extra=st.integers(1, MAX_MESSAGE),
    filler=st.sampled_from(["zeros", "string"]),
)
def test_oversized_requests_are_resource_exhausted(
    runner: Runner, method: str, extra: int, filler: str
) -> None:
    if filler == "zeros":
        body = b"\x00" * (MAX_MESSAGE + extra)
    else:
        request = _valid_request()
        request.agent.system = "x" * (MAX_MESSAGE + extra)
        body = request.SerializeToString()
    answer = _call(runner, method, body)
    assert answer.code == grpc.StatusCode.RESOURCE_EXHAUSTED, (answer.code, answer.details)
    assert answer.details.strip()
    _assert_serving(runner)


def test_oversized_requests_leave_the_runner_serving(runner: Runner) -> None:
    _call(runner, "Execute", b"\x00" * (3 * MAX_MESSAGE))
    _assert_runs_a_valid_turn(runner)


# --- tokens ----------------------------------------------------------------------------------

HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80)


@st.composite
def bad_authorization(draw: st.DrawFn) -> tuple[tuple[str, str], ...]:
    how = draw(st.sampled_from(["none", "random", "wrong-bearer", "no-scheme", "other-scheme", "prefix"]))
    if how == "none":
        return ()
    if how == "random":
        value = draw(HEADER_TEXT)
    elif how == "wrong-bearer":
        value = "Bearer " + draw(HEADER_TEXT)
    elif how == "no-scheme":
        value = "<TOKEN>"
    elif how == "other-scheme":
        value = draw(st.sampled_from(["Basic", "Token", "Bearer:", "Bearerx"])) + " <TOKEN>"
    else:
        value = "Bearer <TOKEN>" + draw(
            st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)
        )
    return (("authorization", value),)


@FUZZ
@given(method=st.sampled_from(sorted(METHODS)), authorization=bad_authorization(), valid=st.booleans())
def test_missing_or_wrong_token_is_unauthenticated(
    runner: Runner, method: str, authorization: tuple[tuple[str, str], ...], valid: bool
) -> None:
    metadata = tuple((k, v.replace("<TOKEN>", runner.token)) for k, v in authorization)
    if any(v.strip() == f"Bearer {runner.token}" for _, v in metadata):
        return  # a value that (after gRPC trims it) is the right token
    body = _valid_request().SerializeToString() if valid and method == "Execute" else b""
    before = sorted(p.name for p in runner.workspace.iterdir())
    answer = _call(runner, method, body, metadata=metadata)
    assert answer.code == grpc.StatusCode.UNAUTHENTICATED, (answer.code, answer.details, metadata)
    assert "bearer token" in answer.details
    assert runner.token not in answer.details
    assert answer.responses == []
    assert sorted(p.name for p in runner.workspace.iterdir()) == before
    _assert_serving(runner)


def test_the_right_token_still_works_after_the_fuzz(runner: Runner) -> None:
    _assert_runs_a_valid_turn(runner)


# --- workspace restores and snapshots ----------------------------------------------------------

_PATHS = st.one_of(
    st.sampled_from(["a", "d/b", "../x", "/etc/passwd", "a/../../outside.txt", "", ".", "a//b", "x\\y"]),
    st.text(max_size=40),
)
_SHA = st.one_of(
    st.just("0" * 64), st.text("0123456789abcdef", min_size=64, max_size=64), st.text(max_size=70)
)
_RESTORE_ITEMS = st.one_of(
    st.builds(
        lambda p, s, n, x: pb.RestoreWorkspaceRequest(
            entry=pb.WorkspaceEntry(path=p, sha256=s, size=n, executable=x)
        ),
        _PATHS,
        _SHA,
        st.integers(-5, 1 << 40),
        st.booleans(),
    ),
    st.builds(
        lambda s, n, c, d, last: pb.RestoreWorkspaceRequest(
            blob=pb.WorkspaceBlob(sha256=s, size=n, compression=c, data=d, last=last)  # type: ignore[arg-type]
        ),
        _SHA,
        st.integers(-5, 1 << 40),
        st.integers(-3, 5),
        st.one_of(st.binary(max_size=256), st.just(__import__("zlib").compress(b"\0" * 1_000_000))),
        st.booleans(),
    ),
    st.just(pb.RestoreWorkspaceRequest()),
)


def _restore(runner: Runner, items: list[bytes]) -> Answer:
    stub = runner.channel.stream_unary(
        SERVICE + "RestoreWorkspace", request_serializer=None, response_deserializer=None
    )
    try:
        response, call = stub.with_call(iter(items), timeout=DEADLINE_S, metadata=runner.auth())
        responses = [response]
    except grpc.RpcError as e:
        call, responses = e, []  # type: ignore[assignment]
    code, details, trailing = call.code(), call.details() or "", call.trailing_metadata() or ()
    assert code != grpc.StatusCode.DEADLINE_EXCEEDED, "RestoreWorkspace hung"
    return Answer(code, details, {k: str(v) for k, v in trailing}, responses)


def _empty_workspace(runner: Runner) -> None:
    import shutil

    for child in runner.workspace.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


@FUZZ
@given(items=st.lists(_RESTORE_ITEMS, max_size=6))
# A blob whose zlib data is not zlib: the inflater's error used to escape as UNKNOWN.
@example(
    items=[
        pb.RestoreWorkspaceRequest(entry=pb.WorkspaceEntry(path="a", sha256="0" * 64, size=0)),
        pb.RestoreWorkspaceRequest(
            blob=pb.WorkspaceBlob(sha256="0" * 64, size=0, compression=2, data=b"\0\0")
        ),
    ]
)
def test_hostile_restore_streams_get_a_clear_answer_and_write_nothing_outside(
    runner: Runner, items: list[pb.RestoreWorkspaceRequest]
) -> None:
    _empty_workspace(runner)
    answer = _restore(runner, [i.SerializeToString() for i in items])
    if answer.code != grpc.StatusCode.OK:
        _assert_clear(answer)
    for path in runner.workspace.rglob("*"):
        assert path.resolve().is_relative_to(runner.workspace.resolve())
    _assert_serving(runner)
    _empty_workspace(runner)


@FEW
@given(body=st.binary(max_size=256))
def test_random_bytes_as_restore_items_and_snapshot_requests_get_a_clear_answer(
    runner: Runner, body: bytes
) -> None:
    _empty_workspace(runner)
    answer = _restore(runner, [body])
    if answer.code != grpc.StatusCode.OK:
        _assert_clear(answer)
    stub = runner.channel.unary_stream(
        SERVICE + "SnapshotWorkspace", request_serializer=None, response_deserializer=None
    )
    call = stub(body, timeout=DEADLINE_S, metadata=runner.auth())
    with __import__("contextlib").suppress(grpc.RpcError):
        for _ in call:
            pass
    if call.code() != grpc.StatusCode.OK:
        assert call.code() in CLEAR, (call.code(), call.details())
    _assert_serving(runner)
    _empty_workspace(runner)


@FEW
@given(max_bytes=st.integers(-(2**63), 2**63 - 1), base=st.text(max_size=80))
def test_any_workspace_options_run_the_turn_or_are_invalid(runner: Runner, max_bytes: int, base: str) -> None:
    request = _valid_request()
    request.workspace.CopyFrom(pb.WorkspaceOptions(snapshots=True, max_bytes=max_bytes, base=base))
    answer = _call(runner, "Execute", request.SerializeToString())
    if max_bytes < 0:
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert "workspace.max_bytes" in answer.details
    else:
        _assert_turn_ended(answer)
    _assert_serving(runner)

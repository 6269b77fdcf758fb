"""Bad input on the wire, fuzzed with hypothesis against real servers in their own processes:
the runner (``python -m airlock.runner``) and the controller (``airlock serve`` on the process
backend). Every request is random bytes, a valid request with bytes flipped, cut or inserted,
or a valid request with a hostile field (deep nesting, huge strings, enum values no version
defines). Expected: every refusal is a clear status (never UNKNOWN or INTERNAL) with a
message, each answer comes within its deadline (no hang), nothing refused is recorded, and
both servers still serve a well-formed call afterwards."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.spec import AgentSpec, ProviderSpec
from layer0 import TurnInput
from tests.support.servers import free_port, wait_serving

pytestmark = [pytest.mark.attack("fuzz"), pytest.mark.timeout(300)]

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: What a refusal may be. UNKNOWN or INTERNAL would be an unhandled error in the server.
CLEAR = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
}
DEADLINE_S = 15.0
RUNNER_METHODS = {
    "/airlock.runner.v1.Runner/Execute": True,
    "/airlock.runner.v1.Runner/Cancel": False,
    "/airlock.runner.v1.Runner/Pause": False,
    "/airlock.runner.v1.Runner/Resume": False,
    "/airlock.runner.v1.Runner/Step": False,
}
CONTROLLER_METHODS = {
    "/airlock.controller.v1.Controller/SubmitJob": False,
    "/airlock.controller.v1.Controller/GetJob": False,
    "/airlock.controller.v1.Controller/WatchJob": True,
    "/airlock.controller.v1.Controller/CancelJob": False,
    "/airlock.controller.v1.Controller/ListJobs": False,
    "/airlock.controller.v1.Controller/GetJobLogs": False,
}


@dataclass
class Server:
    address: str
    token: str
    channel: grpc.Channel
    proc: subprocess.Popen[bytes]

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    def call(self, method: str, streaming: bool, body: bytes) -> grpc.StatusCode:
        """Send ``body`` as the raw request; the status (OK when it was accepted)."""
        try:
            if streaming:
                for _ in self.channel.unary_stream(method)(body, metadata=self.metadata, timeout=DEADLINE_S):
                    pass
            else:
                self.channel.unary_unary(method)(body, metadata=self.metadata, timeout=DEADLINE_S)
        except grpc.RpcError as e:
            code = e.code()  # type: ignore[attr-defined]
            assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{method} hung on {body[:80]!r}"
            assert code in CLEAR, f"{method}: {code} {e.details()} for {body[:80]!r}"  # type: ignore[attr-defined]
            assert e.details(), f"{method}: {code} without a message"  # type: ignore[attr-defined]
            return code  # type: ignore[no-any-return]
        return grpc.StatusCode.OK


def start(argv: list[str], address: str, token: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    try:
        wait_serving(address, proc)
        yield Server(address, token, channel, proc)
        assert proc.poll() is None, "the server died during the fuzzing"
    finally:
        channel.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def agent() -> AgentSpec:
    step = {"response": {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}}
    return AgentSpec(name="fuzzed", provider=ProviderSpec(kind="scripted", script=[step]), system="s")


def valid_execute() -> bytes:
    request = pb.ExecuteRequest(
        agent=wire.spec_to_proto(agent()), input=wire.input_to_proto(TurnInput.new("hi")), execution_id="ok"
    )
    return bytes(request.SerializeToString())


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("runner")
    token = secrets.token_urlsafe(32)
    (root / "token").write_text(token)
    (root / "ws").mkdir()
    address = f"127.0.0.1:{free_port()}"
    argv = [sys.executable, "-m", "airlock.runner", "--listen", address, "--token-file", str(root / "token")]
    argv += ["--workspace", str(root / "ws"), "--max-message-bytes", str(1 << 20), "--max-concurrent", "4"]
    yield from start(argv, address, token)


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("controller")
    token = secrets.token_urlsafe(32)
    (root / "token").write_text(token)
    script = [{"response": {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}}]
    echo = {"provider": {"kind": "scripted", "script": script}, "backend": "process"}
    config = {"version": 1, "agents": {"echo": echo}}
    (root / "airlock.yaml").write_text(json.dumps(config))
    address = f"127.0.0.1:{free_port()}"
    airlock = str(Path(sys.executable).with_name("airlock"))
    argv = [airlock, "serve", "--config", str(root / "airlock.yaml"), "--data-dir", str(root / "data")]
    argv += ["--address", address, "--token-file", str(root / "token")]
    yield from start(argv, address, token, env={**os.environ, "AIRLOCK_CONFIG": ""})


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """``valid`` with bytes flipped, cut, or inserted."""

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        data = bytearray(valid)
        for _ in range(draw(st.integers(1, 8))):
            op = draw(st.sampled_from(["flip", "cut", "insert"]))
            at = draw(st.integers(0, max(0, len(data) - 1)))
            if op == "flip" and data:
                data[at] ^= draw(st.integers(1, 255))
            elif op == "cut":
                del data[at : at + draw(st.integers(1, 16))]
            else:
                data[at:at] = draw(st.binary(min_size=1, max_size=16))
        return bytes(data)

    return build()


# -- the runner -------------------------------------------------------------------------------


@FUZZ
@given(method=st.sampled_from(sorted(RUNNER_METHODS)), body=st.binary(max_size=2048))
def test_runner_random_bytes(runner: Server, method: str, body: bytes) -> None:
    runner.call(method, RUNNER_METHODS[method], body)


@FUZZ
@given(body=mutated(valid_execute()))
def test_runner_mutated_execute(runner: Server, body: bytes) -> None:
    runner.call("/airlock.runner.v1.Runner/Execute", True, body)


@FUZZ
@given(depth=st.integers(1, 200_000), kind=st.sampled_from(["list", "object"]))
def test_runner_deeply_nested_json(runner: Server, depth: int, kind: str) -> None:
    opening, closing = ("[", "]") if kind == "list" else ('{"a":', "}")
    request = pb.ExecuteRequest(
        agent=wire.spec_to_proto(agent()), input=wire.input_to_proto(TurnInput.new("hi")), execution_id="deep"
    )
    request.input.metadata.text = opening * depth + "1" + closing * depth
    runner.call("/airlock.runner.v1.Runner/Execute", True, request.SerializeToString())


@FUZZ
@given(value=st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_runner_enum_values_no_version_defines(runner: Server, value: int) -> None:
    request = pb.ExecuteRequest.FromString(valid_execute())
    request.agent.provider.kind = value  # type: ignore[assignment]
    code = runner.call("/airlock.runner.v1.Runner/Execute", True, request.SerializeToString())
    if value not in pb.ProviderKind.values():
        assert code is grpc.StatusCode.INVALID_ARGUMENT


@FUZZ
@given(states=st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), max_size=5))
def test_controller_enum_values_no_version_defines(controller: Server, states: list[int]) -> None:
    request = cpb.ListJobsRequest()
    request.states.extend(states)  # type: ignore[arg-type]
    code = controller.call("/airlock.controller.v1.Controller/ListJobs", False, request.SerializeToString())
    if any(s not in cpb.JobState.values() or s == 0 for s in states):
        assert code is grpc.StatusCode.INVALID_ARGUMENT


def test_runner_oversized_and_huge_fields(runner: Server) -> None:
    request = pb.ExecuteRequest.FromString(valid_execute())
    request.input.message.text = "x" * (2 << 20)  # over the 1 MiB the runner was started with
    code = runner.call("/airlock.runner.v1.Runner/Execute", True, request.SerializeToString())
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
    request = pb.ExecuteRequest.FromString(valid_execute())
    request.agent.system = "s" * 900_000  # under it: accepted or refused clearly
    runner.call("/airlock.runner.v1.Runner/Execute", True, request.SerializeToString())


def test_runner_still_serves_after_the_fuzzing(runner: Server) -> None:
    assert runner.call("/airlock.runner.v1.Runner/Execute", True, valid_execute()) is grpc.StatusCode.OK


# -- the controller ----------------------------------------------------------------------------


def recorded(controller: Server) -> int:
    stub = cpb_grpc.ControllerStub(controller.channel)
    return len(stub.ListJobs(cpb.ListJobsRequest(), metadata=controller.metadata, timeout=DEADLINE_S).jobs)


def valid_submit() -> bytes:
    request = cpb.SubmitJobRequest(agent="echo", input=wire.input_to_proto(TurnInput.new("hi")))
    return bytes(request.SerializeToString())


@FUZZ
@given(method=st.sampled_from(sorted(CONTROLLER_METHODS)), body=st.binary(max_size=2048))
def test_controller_random_bytes(controller: Server, method: str, body: bytes) -> None:
    before = recorded(controller)
    code = controller.call(method, CONTROLLER_METHODS[method], body)
    if method.endswith("SubmitJob") and code is not grpc.StatusCode.OK:
        assert recorded(controller) == before  # nothing refused is recorded


@FUZZ
@given(body=mutated(valid_submit()))
def test_controller_mutated_submit(controller: Server, body: bytes) -> None:
    before = recorded(controller)
    if controller.call("/airlock.controller.v1.Controller/SubmitJob", False, body) is not grpc.StatusCode.OK:
        assert recorded(controller) == before


@FUZZ
@given(
    agent=st.text(max_size=300),
    text=st.text(max_size=2000),
    depth=st.integers(0, 100_000),
    seconds=st.integers(-(2**40), 2**40),
)
def test_controller_hostile_submissions(
    controller: Server, agent: str, text: str, depth: int, seconds: int
) -> None:
    before = recorded(controller)
    request = cpb.SubmitJobRequest(agent=agent, input=wire.input_to_proto(TurnInput.new(text or "x")))
    request.input.metadata.text = "[" * depth + "]" * depth if depth else "null"
    request.max_duration.seconds = seconds
    code = controller.call("/airlock.controller.v1.Controller/SubmitJob", False, request.SerializeToString())
    if code is not grpc.StatusCode.OK:
        assert recorded(controller) == before


def test_controller_still_serves_after_the_fuzzing(controller: Server) -> None:
    assert (
        controller.call("/airlock.controller.v1.Controller/SubmitJob", False, valid_submit())
        is grpc.StatusCode.OK
    )
    stub = cpb_grpc.ControllerStub(controller.channel)
    agents = stub.ListAgents(cpb.ListAgentsRequest(), metadata=controller.metadata, timeout=DEADLINE_S)
    assert [a.name for a in agents.agents] == ["echo"]

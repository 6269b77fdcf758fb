"""Bad input for the controller's gRPC API, fuzzed with hypothesis against a real in-process
``ControllerServer`` over a real ``JobService`` and SQLite job store (its own event loop on a
thread, served on 127.0.0.1). The service is not started, so no worker ever runs a job and
no sandbox backend (Docker) is needed: an accepted job just stays queued.

Fuzzed: random bytes as the raw request body of every Controller method; SubmitJob with
unknown agent names, hostile inputs (deep JSON metadata, NaN, huge strings, empty
messages), negative, zero and overflowing durations (``max_duration`` and the input's
``max_duration``); ListJobs with job states no version defines and every ``page_size``; job
ids and ``after_seq`` values (up to 2**64-1) for GetJob, WatchJob, CancelJob and GetJobLogs;
oversized requests; a missing or wrong token.

Expected: every refusal is a clear status (INVALID_ARGUMENT, NOT_FOUND, UNAUTHENTICATED,
RESOURCE_EXHAUSTED; never UNKNOWN or INTERNAL) with a non-empty message a client can read;
no call runs into its deadline; a refused SubmitJob records nothing in the job store (an
accepted one records exactly one queued job); and the controller still answers a health
check and a valid SubmitJob afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, SqliteJobStore
from airlock.controller._grpc import MAX_MESSAGE_BYTES
from airlock.identity import FailureThrottle
from airlock.state import SqliteStore
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
    grpc.StatusCode.OUT_OF_RANGE,
}
DEADLINE_S = 10.0
SERVICE = "/airlock.controller.v1.Controller/"
#: Each method, whether it streams its answer, and its request message.
METHODS: dict[str, tuple[bool, Any]] = {
    "SubmitJob": (False, cpb.SubmitJobRequest),
    "GetJob": (False, cpb.GetJobRequest),
    "WatchJob": (True, cpb.WatchJobRequest),
    "CancelJob": (False, cpb.CancelJobRequest),
    "ListJobs": (False, cpb.ListJobsRequest),
    "GetJobLogs": (False, cpb.GetJobLogsRequest),
    "ListAgents": (False, cpb.ListAgentsRequest),
}
CONFIG = """\
version: 1
agents:
  fuzz:
    provider: {kind: scripted, script: []}
    backend: process
  timed:
    provider: {kind: scripted, script: []}
    backend: process
    defaults: {max_duration: 30s}
"""
AGENTS = ("fuzz", "timed")
UINT64_MAX = 2**64 - 1


@dataclass
class Service:
    server: ControllerServer
    service: JobService
    token: str
    channel: grpc.Channel
    run: Any
    #: A queued job (its WatchJob streams until the deadline: a job that never ends).
    job_id: str
    db: Path

    def auth(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    def job_count(self) -> int:
        """The jobs in the store's file (read on a connection of its own)."""
        with contextlib.closing(sqlite3.connect(self.db)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


@dataclass
class Answer:
    code: grpc.StatusCode
    details: str
    responses: list[bytes]


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("fuzz-controller")
    config = root / "airlock.yaml"
    config.write_text(CONFIG)
    token = secrets.token_urlsafe(32)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    store = SqliteJobStore(root / "jobs.db")
    state = SqliteStore(root / "state.db")
    run(store.__aenter__())
    run(state.__aenter__())

    async def make() -> tuple[JobService, ControllerServer]:
        service = JobService(store, AgentRunner(load_config(config)), state)  # not started: no workers
        # The fuzz sends thousands of wrong credentials from one address: the failure throttle
        # (tested in tests/unit/tenancy) is set out of its way.
        lenient = FailureThrottle(limit=10**9)
        return service, ControllerServer(service, token, "127.0.0.1:0", throttle=lenient)

    service, server = run(make())
    address = run(server.start())
    channel = grpc.insecure_channel(
        address,
        options=[
            ("grpc.max_send_message_length", 4 * MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    job = run(service.submit("fuzz", TurnInput.new("the one job watched")))
    try:
        yield Service(server, service, token, channel, run, job.id, root / "jobs.db")
    finally:
        channel.close()
        run(server.stop(0.5))
        run(state.__aexit__(None, None, None))
        run(store.__aexit__(None, None, None))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _call(
    svc: Service, method: str, body: bytes, metadata: Any = None, timeout: float = DEADLINE_S
) -> Answer:
    """Send ``body`` as the raw request of ``method``; the status, details and answers."""
    streaming = METHODS[method][0]
    metadata = svc.auth() if metadata is None else metadata
    responses: list[bytes] = []
    if streaming:
        stub = svc.channel.unary_stream(SERVICE + method, request_serializer=None, response_deserializer=None)
        call = stub(body, timeout=timeout, metadata=metadata)
        try:
            for item in call:
                responses.append(item)
        except grpc.RpcError:
            pass
        code, details = call.code(), call.details() or ""
    else:
        unary = svc.channel.unary_unary(SERVICE + method, request_serializer=None, response_deserializer=None)
        try:
            responses.append(unary(body, timeout=timeout, metadata=metadata))
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            code, details = e.code(), e.details() or ""  # type: ignore[attr-defined]
    return Answer(code, details, responses)


def _assert_clear(answer: Answer, method: str = "") -> None:
    assert answer.code != grpc.StatusCode.DEADLINE_EXCEEDED, f"{method} hung"
    assert answer.code in CLEAR, f"{method}: unclear status {answer.code}: {answer.details}"
    assert answer.details.strip(), f"{method}: {answer.code} without a message"


def _assert_serving(svc: Service) -> None:
    health = health_pb2_grpc.HealthStub(svc.channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service="airlock.controller.v1.Controller"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def _submit_request(agent: str = "fuzz", text: str = "hello") -> cpb.SubmitJobRequest:
    return cpb.SubmitJobRequest(agent=agent, input=wire.input_to_proto(TurnInput.new(text)))


def _assert_accepts_a_valid_job(svc: Service) -> None:
    _assert_serving(svc)
    before = svc.job_count()
    answer = _call(svc, "SubmitJob", _submit_request().SerializeToString())
    assert answer.code == grpc.StatusCode.OK, answer.details
    job = cpb.Job.FromString(answer.responses[0])
    assert job.state == cpb.JOB_STATE_QUEUED and job.agent == "fuzz"
    assert svc.job_count() == before + 1
    got = _call(svc, "GetJob", cpb.GetJobRequest(id=job.id).SerializeToString())
    assert got.code == grpc.StatusCode.OK and cpb.Job.FromString(got.responses[0]).id == job.id


def _submit(svc: Service, request: cpb.SubmitJobRequest | bytes) -> Answer:
    """SubmitJob: a refusal records nothing; an acceptance records exactly one queued job."""
    body = request if isinstance(request, bytes) else request.SerializeToString()
    before = svc.job_count()
    answer = _call(svc, "SubmitJob", body)
    if answer.code == grpc.StatusCode.OK:
        job = cpb.Job.FromString(answer.responses[0])
        assert job.state == cpb.JOB_STATE_QUEUED and job.agent in AGENTS
        assert svc.job_count() == before + 1
    else:
        _assert_clear(answer, "SubmitJob")
        assert svc.job_count() == before, f"a refused job was recorded: {answer.details}"
    return answer


def _parses(message_type: Any, body: bytes) -> bool:
    try:
        message_type.FromString(body)
    except Exception:
        return False
    return True


# --- random bytes ----------------------------------------------------------------------------


@st.composite
def _mutated_submit(draw: st.DrawFn) -> bytes:
    data = bytearray(_submit_request().SerializeToString())
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


@FUZZ
@given(method=st.sampled_from(sorted(METHODS)), body=st.binary(max_size=1024) | _mutated_submit())
def test_random_bytes_get_a_clear_answer(controller: Service, method: str, body: bytes) -> None:
    if method == "SubmitJob":
        answer = _submit(controller, body)
    else:
        answer = _call(controller, method, body, timeout=3.0 if method == "WatchJob" else DEADLINE_S)
    if not _parses(METHODS[method][1], body):
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert "does not parse" in answer.details
    elif method in ("GetJob", "WatchJob", "CancelJob", "GetJobLogs"):
        request = METHODS[method][1].FromString(body)
        if not request.id:  # a missing id is a bad request, naming the field
            assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
            assert answer.details == "id: is required"
        elif request.id != controller.job_id:  # random ids name no job
            assert answer.code == grpc.StatusCode.NOT_FOUND, (answer.code, answer.details)
            assert "not found" in answer.details.lower() or "no job" in answer.details.lower()
    elif method == "ListAgents" and cpb.ListAgentsRequest.FromString(body).page_token:
        # random bytes are no page token of this request: refused on the field
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert answer.details.startswith("page_token: ")
    elif method == "ListAgents":
        assert answer.code == grpc.StatusCode.OK
        agents = cpb.ListAgentsResponse.FromString(answer.responses[0]).agents
        assert sorted(a.name for a in agents) == sorted(AGENTS)
    if answer.code != grpc.StatusCode.OK:
        _assert_clear(answer, method)
    _assert_serving(controller)


def test_random_bytes_leave_the_controller_serving(controller: Service) -> None:
    _assert_accepts_a_valid_job(controller)


# --- SubmitJob ---------------------------------------------------------------------------------

AGENT_NAMES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " fuzz", "fuzz ", "FUZZ", "fuzz\x00", "../fuzz", "*", "%", "fuzz;DROP TABLE jobs"]),
    st.builds(lambda n: "a" * n, st.integers(10_000, 100_000)),
)


@FUZZ
@given(agent=AGENT_NAMES)
def test_unknown_agents_are_not_found_and_record_nothing(controller: Service, agent: str) -> None:
    answer = _submit(controller, _submit_request(agent=agent))
    if agent in AGENTS:
        assert answer.code == grpc.StatusCode.OK
        return
    if agent == "":
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT and "agent: is required" in answer.details
    else:
        assert answer.code == grpc.StatusCode.NOT_FOUND, (answer.code, answer.details)
        assert "unknown agent" in answer.details
        assert "fuzz" in answer.details  # the message lists the configured agents
    assert len(answer.details.encode()) < 8192


MS = 1000
DURATIONS = st.one_of(
    st.builds(
        Duration, seconds=st.integers(-(2**63), 2**63 - 1), nanos=st.integers(-999_999_999, 999_999_999)
    ),
    st.builds(Duration, seconds=st.sampled_from([0, 1, -1, 2**31, 2**53, 2**62, 2**63 - 1, -(2**63)])),
    st.builds(Duration, seconds=st.integers(0, 3), nanos=st.integers(-(2**31), 2**31 - 1)),
)


@FUZZ
@given(
    max_duration=DURATIONS, where=st.sampled_from(["request", "input", "both"]), agent=st.sampled_from(AGENTS)
)
def test_negative_and_overflowing_durations(
    controller: Service, max_duration: Duration, where: str, agent: str
) -> None:
    request = _submit_request(agent=agent)
    if where in ("request", "both"):
        request.max_duration.CopyFrom(max_duration)
    if where in ("input", "both"):
        request.input.config.max_duration.CopyFrom(max_duration)
    answer = _submit(controller, request)
    exact_ns = max_duration.seconds * 1_000_000_000 + max_duration.nanos
    if answer.code == grpc.StatusCode.OK:
        job = cpb.Job.FromString(answer.responses[0])
        limit = job.max_duration.seconds * MS + job.max_duration.nanos // 1_000_000
        assert 0 < limit < 2**63, f"accepted a job with limit {limit} ms"
        if where != "input" and exact_ns != 0:  # 0: the default limit
            assert abs(limit * 1_000_000 - exact_ns) < 1_000_000, (limit, exact_ns)
    else:
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert "duration" in answer.details


@st.composite
def hostile_inputs(draw: st.DrawFn) -> tuple[cpb.SubmitJobRequest, bool]:
    """A SubmitJob whose input is hostile, and whether it must be refused."""
    request = _submit_request()
    how = draw(
        st.sampled_from(["deep", "nan", "garbage", "empty", "no-input", "huge", "trigger", "cost", "tools"])
    )
    refuse = True
    if how == "deep":
        depth = draw(st.integers(65, 20_000))
        request.input.metadata.text = "[" * depth + "]" * depth
    elif how == "nan":
        request.input.metadata.text = draw(st.sampled_from(["NaN", "[Infinity]", '{"a": -Infinity}']))
    elif how == "garbage":
        request.input.metadata.text = draw(st.sampled_from(["{", "[1,", "'a'", "{a: 1}", "\x00", "1 2"]))
    elif how == "empty":
        request.input.message.text = ""
    elif how == "no-input":
        request.ClearField("input")
    elif how == "huge":
        size = draw(st.integers(50_000, 250_000))
        request.input.message.text = draw(st.sampled_from(["a", "é", "\x00"])) * size
        request.queue = "q" * draw(st.integers(0, 50_000))
        request.workflow = "w" * draw(st.integers(0, 50_000))
        refuse = False
    elif how == "trigger":
        request.input.trigger.Clear()  # no variant set
    elif how == "cost":
        request.input.config.max_cost = draw(st.sampled_from(["NaN", "-Infinity", "abc", "1e", "", "0x10"]))
    else:
        request.input.config.allowed_tools.values.extend(draw(st.lists(st.text(max_size=10), max_size=5)))
        refuse = False
    return request, refuse


@FUZZ
@given(case=hostile_inputs())
def test_hostile_inputs_are_refused_with_their_path(
    controller: Service, case: tuple[cpb.SubmitJobRequest, bool]
) -> None:
    request, refuse = case
    answer = _submit(controller, request)
    if refuse:
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert answer.details.startswith("input"), answer.details
    elif answer.code != grpc.StatusCode.OK:
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)


@settings(FEW, max_examples=10)
@given(method=st.sampled_from(sorted(METHODS)), extra=st.integers(1, MAX_MESSAGE_BYTES))
def test_oversized_requests_are_resource_exhausted(controller: Service, method: str, extra: int) -> None:
    before = controller.job_count()
    if method == "SubmitJob":
        request = _submit_request()
        request.input.message.text = "x" * (MAX_MESSAGE_BYTES + extra)
        body = request.SerializeToString()
    else:
        body = b"\x00" * (MAX_MESSAGE_BYTES + extra)
    answer = _call(controller, method, body)
    assert answer.code == grpc.StatusCode.RESOURCE_EXHAUSTED, (answer.code, answer.details)
    assert answer.details.strip()
    assert controller.job_count() == before
    _assert_serving(controller)


# --- the other RPCs ----------------------------------------------------------------------------

JOB_IDS = st.one_of(
    st.text(max_size=64),
    st.sampled_from(["", "%", "*", "' OR 1=1 --", "\x00", "../jobs.db"]),
    st.builds(lambda n: "j" * n, st.integers(10_000, 100_000)),
)
SEQS = st.one_of(st.integers(0, UINT64_MAX), st.sampled_from([0, 2**63 - 1, 2**63, UINT64_MAX]))


@FUZZ
@given(
    method=st.sampled_from(["GetJob", "WatchJob", "CancelJob", "GetJobLogs"]),
    job_id=JOB_IDS,
    after_seq=SEQS,
    existing=st.booleans(),
)
def test_job_ids_and_sequence_numbers(
    controller: Service, method: str, job_id: str, after_seq: int, existing: bool
) -> None:
    if existing and method != "CancelJob":  # keep the watched job queued
        job_id = controller.job_id
    fields: dict[str, Any] = {"id": job_id}
    if method in ("WatchJob", "GetJobLogs"):
        fields["after_seq"] = after_seq
    elif method == "CancelJob":
        fields["reason"] = "fuzz"
    body = METHODS[method][1](**fields).SerializeToString()
    timeout = 0.2 if method == "WatchJob" and job_id == controller.job_id else DEADLINE_S
    answer = _call(controller, method, body, timeout=timeout)
    if job_id == controller.job_id:
        if method == "WatchJob":
            # A queued job's stream stays open for live events: only the deadline ends it.
            assert answer.code in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED), answer
            seqs = [cpb.JobEvent.FromString(r).seq for r in answer.responses]
            assert all(s > after_seq for s in seqs)
        else:
            assert answer.code == grpc.StatusCode.OK, (answer.code, answer.details)
        return
    if not job_id:  # a missing id is a bad request, naming the field
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert answer.details == "id: is required"
        return
    assert answer.code == grpc.StatusCode.NOT_FOUND, (answer.code, answer.details[:200])
    assert answer.details.strip()
    assert len(answer.details.encode()) < 8192


@FUZZ
@given(
    states=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
    limit=st.integers(0, 2**32 - 1),
    agent=st.text(max_size=20),
    before_id=st.text(max_size=20),
)
def test_list_jobs_filters(
    controller: Service, states: list[int], limit: int, agent: str, before_id: str
) -> None:
    request = cpb.ListJobsRequest(agent=agent, before_id=before_id, page_size=limit)
    request.states.extend(states)  # type: ignore[arg-type]
    answer = _call(controller, "ListJobs", request.SerializeToString())
    valid = set(cpb.JobState.values()) - {cpb.JOB_STATE_UNSPECIFIED}
    if all(s in valid for s in states):
        assert answer.code == grpc.StatusCode.OK, (answer.code, answer.details)
        jobs = cpb.ListJobsResponse.FromString(answer.responses[0]).jobs
        assert len(jobs) <= min(limit or 50, 1000)
        assert all(j.agent == agent for j in jobs) or not agent
        assert all(j.state in states for j in jobs) or not states
    else:
        assert answer.code == grpc.StatusCode.INVALID_ARGUMENT, (answer.code, answer.details)
        assert "state" in answer.details


# --- tokens ------------------------------------------------------------------------------------

HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80)


@FUZZ
@given(
    method=st.sampled_from(sorted(METHODS)),
    value=st.none() | HEADER_TEXT | HEADER_TEXT.map("Bearer ".__add__),
)
def test_missing_or_wrong_token_is_unauthenticated(
    controller: Service, method: str, value: str | None
) -> None:
    if value is not None and value.strip().lower() == f"bearer {controller.token}".lower():
        return
    metadata = () if value is None else (("authorization", value),)
    body = _submit_request().SerializeToString() if method == "SubmitJob" else b""
    before = controller.job_count()
    answer = _call(controller, method, body, metadata=metadata)
    assert answer.code == grpc.StatusCode.UNAUTHENTICATED, (answer.code, answer.details)
    assert "credentials" in answer.details and controller.token not in answer.details
    assert answer.responses == []
    assert controller.job_count() == before


def test_the_controller_still_serves_after_the_fuzz(controller: Service) -> None:
    _assert_accepts_a_valid_job(controller)

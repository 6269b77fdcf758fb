"""Typed job events end to end: every kind through the JSON the store keeps, a real SQLite
file (reopened), the protobuf messages, and a real gRPC server and client on loopback; and a
file written by the first controllers (events as free JSON) still loads, typed."""

from __future__ import annotations

import json
import sqlite3
import typing
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.behaviour import ApprovalDecision
from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, JobStoreError, SqliteJobStore
from airlock.controller._migrate import SCHEMA_VERSION
from airlock.jobs import (
    JOB_EVENT_DATA,
    ApprovalChanged,
    ChildJobChanged,
    ControllerClient,
    EffectApplied,
    EffectOutcome,
    EventKind,
    JobError,
    JobEvent,
    JobEventData,
    JobResumed,
    JobState,
    LogLine,
    SandboxActivity,
    SignalRecorded,
    StateChanged,
    TreeBudgetChanged,
    WorkspaceChanged,
)
from airlock.jobs import event_wire as ew
from airlock.policy import WorkspaceBlob, WorkspaceSnapshot, WorkspaceStopped
from airlock.proxy import CredentialProxyEvent
from airlock.sandbox import SandboxEvent
from airlock.state import SqliteStore
from airlock.turn import (
    InferenceFinished,
    PendingCall,
    ToolStarted,
    TurnStarted,
)
from layer0 import AgentId, LogLevel, TurnInput
from tests.support.events import EGRESS, SANDBOX_EVENTS

DECIDED_AT = datetime(2026, 11, 23, 10, 5, 0, 654321, tzinfo=UTC)

#: One of each job event kind, optional fields set and not.
EVENTS: list[JobEventData] = [
    StateChanged(state=JobState.QUEUED),
    StateChanged(state=JobState.RUNNING, previous=JobState.PROVISIONING, detail="the turn started"),
    *(SandboxActivity(event=e) for e in SANDBOX_EVENTS),
    EffectApplied(
        outcome=EffectOutcome(index=0, effect="delegate", status="ok", agent=AgentId("calc")), source="boss"
    ),
    EffectApplied(
        outcome=EffectOutcome(
            index=2, effect="custom", status="refused", detail="not granted", result=[1, None]
        ),
        depth=1,
        source="calc",
        job="j-child",
    ),
    ChildJobChanged(phase="started", job="j-child", agent="calc", origin="delegate"),
    ChildJobChanged(phase="finished", job="j-child", agent="calc", origin="handoff", state=JobState.FAILED),
    SignalRecorded(target="wf", signal_type="ping", data={"n": 1}, count=1),
    SignalRecorded(target="wf", signal_type="pong", count=2, from_job="j-other"),
    LogLine(level=LogLevel.WARN, message="reaped", source="controller"),
    LogLine(level=LogLevel.ERROR, message="x", source="calc", data={"k": [1.5, "v"]}, job="j-child"),
    ApprovalChanged(
        phase="requested",
        calls=[
            PendingCall(
                tool_use_id="t9", name="bash", input={"command": "rm -rf out"}, risks=["destructive"]
            ),
            PendingCall(tool_use_id="t10", name="http", input=None),
        ],
    ),
    ApprovalChanged(
        phase="decided",
        decision=ApprovalDecision(approver="ana", approve=False, comment="no", time=DECIDED_AT),
    ),
    ApprovalChanged(
        phase="decided",
        decision=ApprovalDecision(approver="policy", approve=True, time=DECIDED_AT, automatic=True),
    ),
    ApprovalChanged(phase="resolved", outcome="rejected"),
    ApprovalChanged(phase="resolved", outcome="approved"),
    JobResumed(
        resume=1, cause="lost", reason="the sandbox died", iteration=2, lost_calls=["t1 bash: re-run"]
    ),
    JobResumed(resume=2, cause="restart", reason="the controller restarted", iteration=3),
    JobResumed(resume=3, cause="approval", reason="approved", iteration=0),
    WorkspaceChanged(phase="saved", manifest="sha256:" + "a" * 64, files=3, bytes=1200),
    WorkspaceChanged(phase="restored", manifest="sha256:" + "a" * 64, files=3, bytes=1200),
    WorkspaceChanged(phase="stopped", max_bytes=1000, bytes=2000, reason="the workspace outgrew max_bytes"),
    TreeBudgetChanged(decision="continue", spent=Decimal("0.10"), tokens=40, max_cost=Decimal("2.00")),
    TreeBudgetChanged(
        decision="downgrade_model",
        spent=Decimal("1.6"),
        tokens=9,
        elapsed_ms=1200,
        max_tokens=100,
        max_duration_ms=60_000,
        model="cheaper-model",
        reason="past 0.8",
    ),
    StateChanged(
        state=JobState.FAILED,
        previous=JobState.RUNNING,
        detail="boom",
        error=JobError(kind="model", message="boom"),
    ),
]


def _variants(union: object) -> set[type]:
    (inner, *_rest) = typing.get_args(union)
    return set(typing.get_args(inner))


def test_the_samples_cover_every_kind_and_every_sandbox_event() -> None:
    assert {type(e) for e in EVENTS} == _variants(JobEventData)
    workspace = {WorkspaceBlob, WorkspaceSnapshot, WorkspaceStopped}  # never job events
    assert {type(e) for e in SANDBOX_EVENTS} == _variants(SandboxEvent) - workspace
    assert EVENTS[-1].kind == "state" and isinstance(EVENTS[-1], StateChanged) and EVENTS[-1].state.terminal


@pytest.mark.parametrize("data", EVENTS, ids=lambda d: f"{d.kind}")
def test_every_event_round_trips_through_its_json(data: JobEventData) -> None:
    text = JOB_EVENT_DATA.dump_json(data)
    assert json.loads(text)["kind"] == data.kind
    assert JOB_EVENT_DATA.validate_json(text) == data


@pytest.mark.parametrize("data", EVENTS, ids=lambda d: f"{d.kind}")
def test_every_event_round_trips_through_its_message(data: JobEventData) -> None:
    event = JobEvent(job_id="j1", seq=7, time=datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=UTC), data=data)
    wire_bytes = ew.event_to_proto(event).SerializeToString()
    message = type(ew.event_to_proto(event))()
    message.ParseFromString(wire_bytes)
    assert message.WhichOneof("event") == data.kind
    assert ew.event_from_proto(message) == event


@pytest.mark.parametrize(
    "event",
    [
        WorkspaceBlob(sha256="0" * 64, size=0),
        WorkspaceStopped(reason="too big"),
    ],
    ids=lambda e: e.type,
)
def test_a_workspace_event_never_becomes_a_job_event(event: SandboxEvent) -> None:
    from airlock.wire import MalformedMessage

    with pytest.raises(MalformedMessage, match="never a job event"):
        ew.sandbox_event_to_proto(event)


def test_a_message_without_an_event_is_malformed() -> None:
    from airlock.wire import MalformedMessage

    event = ew.event_to_proto(JobEvent(job_id="j", seq=1, time=datetime.now(UTC), data=EVENTS[0]))
    event.ClearField("state")
    with pytest.raises(MalformedMessage, match="no event"):
        ew.event_from_proto(event)


@pytest.mark.parametrize(
    ("kind", "field", "named"),
    [
        ("effect", "status", "effect status"),
        ("child", "phase", "child phase"),
        ("approval", "phase", "approval phase"),
        ("approval", "outcome", "approval outcome"),
        ("resume", "cause", "resume cause"),
    ],
)
def test_an_unknown_enum_number_is_malformed_and_names_the_valid_ones(
    kind: str, field: str, named: str
) -> None:
    from airlock.wire import MalformedMessage

    data = next(e for e in EVENTS if e.kind == kind)
    event = ew.event_to_proto(JobEvent(job_id="j", seq=1, time=datetime.now(UTC), data=data))
    setattr(getattr(event, kind), field, 99)
    with pytest.raises(MalformedMessage, match=f"{kind}.{field}: unknown {named} 99; valid: "):
        ew.event_from_proto(event)


def test_effect_events_never_hold_a_childs_output_or_report() -> None:
    from airlock.jobs import EffectReport
    from layer0 import Content, ExitReason, TurnMetadata, TurnOutput

    output = TurnOutput(
        message=Content.text("x"), exit_reason=ExitReason.complete(), metadata=TurnMetadata.empty()
    )
    outcome = EffectOutcome(
        index=0,
        effect="delegate",
        status="ok",
        child_output=output,
        follow_up=EffectReport(depth=1, outcomes=[]),
    )
    data = EffectApplied(outcome=outcome, source="boss")
    assert data.outcome.child_output is None and data.outcome.follow_up is None


async def test_every_event_round_trips_through_a_reopened_store(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    async with SqliteJobStore(path) as store:
        job, first = await store.create(agent="a", input=TurnInput.new("hi"))
        appended = [first, *[await store.append(job.id, data) for data in EVENTS[1:]]]
        assert [e.data for e in appended] == [EVENTS[0], *EVENTS[1:]]
    async with SqliteJobStore(path) as store:
        events = await store.events(job.id)
        assert events == appended
        assert events[-1].terminal and not any(e.terminal for e in events[:-1])
        for kind in typing.get_args(EventKind):
            of_kind = await store.events(job.id, kind=kind)
            assert of_kind == [e for e in appended if e.kind == kind] and of_kind
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        kinds = {k for (k,) in conn.execute("SELECT DISTINCT kind FROM events")}
        assert kinds == set(typing.get_args(EventKind))


async def test_every_event_crosses_the_grpc_server_and_client(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("responses: []\n")
    config_file = tmp_path / "airlock.yaml"
    config_file.write_text(
        "version: 1\nagents:\n  a:\n    provider: {kind: scripted, script: s.yaml}\n    backend: process\n"
    )
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
    ):
        job, first = await store.create(agent="a", input=TurnInput.new("hi"))
        recorded = [first, *[await store.append(job.id, data) for data in EVENTS[1:]]]
        service = JobService(store, AgentRunner(load_config(config_file)), state)  # not started: no workers
        async with (
            ControllerServer(service, "t0ken", "127.0.0.1:0") as server,
            ControllerClient(server.address, "t0ken") as client,
        ):
            assert [e async for e in client.watch(job.id)] == recorded
            assert [e async for e in client.watch(job.id, after_seq=10)] == recorded[10:]
            logs = await client.logs(job.id)
            assert logs == [e for e in recorded if isinstance(e.data, LogLine)] and len(logs) == 2


# -- a file written by the first controllers --------------------------------------------------------

#: Event rows exactly as the first controllers wrote them: ``(kind, data JSON)``.
OLD_ROWS: list[tuple[str, str]] = [
    ("state", '{"state":"queued","detail":null}'),
    ("state", '{"state":"provisioning","detail":null}'),
    ("state", '{"state":"running","detail":"the turn started in its sandbox"}'),
    ("turn", '{"type":"started"}'),
    (
        "turn",
        '{"type":"inference_finished","iteration":1,"stop_reason":"tool_use","tokens_in":40,"tokens_out":12,'
        '"cost":"0.0001","total_tokens_in":40,"total_tokens_out":12,"total_cost":"0.0001","duration_ms":9}',
    ),
    (
        "turn",
        '{"type":"tool_started","tool_use_id":"t1","name":"calculator","input":{"expression":"17 * 23"}}',
    ),
    (
        "egress",
        '{"time":"2026-11-22T20:31:05.123Z","client":"172.30.0.5:41234","type":"egress","phase":"decision",'
        '"method":"CONNECT","host":"api.example.com","port":443,"ip":null,"sni":null,"allowed":false,'
        '"rule":"deny (default)","reason":"no rule","bytes_up":null,"bytes_down":null,"duration_ms":null}',
    ),
    (
        "credential_proxy",
        '{"time":"2026-11-22T20:31:06.000Z","client":"c","type":"credential_proxy","credential":"k",'
        '"method":"POST","path":"/v1","upstream":"https://u","status":200,"reason":"","bytes_up":1,'
        '"bytes_down":2,"duration_ms":3,"redacted":0}',
    ),
    ("log", '{"level":"warn","message":"turn ended: complete","source":"turn"}'),
    ("state", '{"state":"applying_effects","detail":null}'),
    ("child", '{"phase":"started","job":"j-c","agent":"calc","origin":"delegate"}'),
    ("child", '{"phase":"finished","job":"j-c","agent":"calc","origin":"delegate","state":"succeeded"}'),
    (
        "effect",
        '{"index":0,"effect":"delegate","status":"ok","detail":null,"agent":"calc","depth":0,"source":"boss"}',
    ),
    (
        "effect",
        '{"index":1,"effect":"write_memory","status":"refused","detail":"no","agent":null,"depth":1,'
        '"source":"calc","job":"j-c"}',
    ),
    ("log", '{"level":"info","message":"m","source":"calc","data":{"a":1},"job":"j-c"}'),
    ("signal", '{"target":"wf","signal_type":"ping","data":{"n":1},"count":1}'),
    ("signal", '{"target":"wf","signal_type":"ping","data":null,"count":2,"from_job":"j-x"}'),
    ("turn", '{"repr":"<object at 0x1>"}'),
    ("log", '{"level":"warn","message":"reaped","source":"controller"}'),
    (
        "state",
        '{"state":"interrupted","detail":"gone","error":{"kind":"interrupted","message":"gone"}}',
    ),
]

#: What each old row reads as now.
OLD_EVENTS: list[JobEventData] = [
    StateChanged(state=JobState.QUEUED),
    StateChanged(state=JobState.PROVISIONING),
    StateChanged(state=JobState.RUNNING, detail="the turn started in its sandbox"),
    SandboxActivity(event=TurnStarted()),
    SandboxActivity(
        event=InferenceFinished(
            iteration=1,
            stop_reason="tool_use",
            tokens_in=40,
            tokens_out=12,
            cost=Decimal("0.0001"),
            total_tokens_in=40,
            total_tokens_out=12,
            total_cost=Decimal("0.0001"),
            duration_ms=9,
        )
    ),
    SandboxActivity(event=ToolStarted(tool_use_id="t1", name="calculator", input={"expression": "17 * 23"})),
    SandboxActivity(
        event=EGRESS.model_copy(
            update={"ip": None, "sni": None, "allowed": False, "rule": "deny (default)", "reason": "no rule"}
        )
    ),
    SandboxActivity(
        event=CredentialProxyEvent(
            time="2026-11-22T20:31:06.000Z",
            client="c",
            credential="k",
            method="POST",
            path="/v1",
            upstream="https://u",
            status=200,
            bytes_up=1,
            bytes_down=2,
            duration_ms=3,
        )
    ),
    LogLine(level=LogLevel.WARN, message="turn ended: complete", source="turn"),
    StateChanged(state=JobState.APPLYING_EFFECTS),
    ChildJobChanged(phase="started", job="j-c", agent="calc", origin="delegate"),
    ChildJobChanged(phase="finished", job="j-c", agent="calc", origin="delegate", state=JobState.SUCCEEDED),
    EffectApplied(
        outcome=EffectOutcome(index=0, effect="delegate", status="ok", agent=AgentId("calc")), source="boss"
    ),
    EffectApplied(
        outcome=EffectOutcome(index=1, effect="write_memory", status="refused", detail="no"),
        depth=1,
        source="calc",
        job="j-c",
    ),
    LogLine(level=LogLevel.INFO, message="m", source="calc", data={"a": 1}, job="j-c"),
    SignalRecorded(target="wf", signal_type="ping", data={"n": 1}, count=1),
    SignalRecorded(target="wf", signal_type="ping", count=2, from_job="j-x"),
    LogLine(
        level=LogLevel.WARN,
        source="controller",
        message="",  # checked apart: it names the problem
        data={"kind": "turn", "data": '{"repr":"<object at 0x1>"}'},
    ),
    LogLine(level=LogLevel.WARN, message="reaped", source="controller"),
    StateChanged(
        state=JobState.INTERRUPTED, detail="gone", error=JobError(kind="interrupted", message="gone")
    ),
]

#: The first controllers' schema (the tables are unchanged; the file's user_version was 0).
OLD_SCHEMA = """
CREATE TABLE jobs (
    n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, agent TEXT NOT NULL,
    state TEXT NOT NULL, queue TEXT NOT NULL, parent_id TEXT, origin TEXT NOT NULL,
    workflow TEXT NOT NULL, session TEXT, input TEXT NOT NULL, output TEXT, error TEXT,
    created_at REAL NOT NULL, started_at REAL, finished_at REAL, max_duration_ms INTEGER,
    children TEXT NOT NULL DEFAULT '[]', effects TEXT
);
CREATE TABLE events (
    job_id TEXT NOT NULL, seq INTEGER NOT NULL, time REAL NOT NULL, kind TEXT NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (job_id, seq)
);
CREATE TABLE signals (
    n INTEGER PRIMARY KEY AUTOINCREMENT, workflow TEXT NOT NULL, signal_type TEXT NOT NULL,
    data TEXT NOT NULL, source_job TEXT, time REAL NOT NULL
);
"""


def _write_old_file(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript(OLD_SCHEMA)
        conn.execute(
            "INSERT INTO jobs (id, agent, state, queue, origin, workflow, input, created_at, error) "
            "VALUES ('j-old', 'boss', 'interrupted', 'boss', 'submit', 'j-old', ?, 1.0, ?)",
            (
                TurnInput.new("hi").model_dump_json(),
                JobError(kind="interrupted", message="gone").model_dump_json(),
            ),
        )
        conn.executemany(
            "INSERT INTO events (job_id, seq, time, kind, data) VALUES ('j-old', ?, ?, ?, ?)",
            [(seq, 1_700_000_000.0 + seq, kind, data) for seq, (kind, data) in enumerate(OLD_ROWS, 1)],
        )
        conn.commit()
    finally:
        conn.close()


async def test_a_file_of_the_first_controllers_loads_typed(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    _write_old_file(path)
    async with SqliteJobStore(path) as store:
        events = await store.events("j-old")
        assert [e.seq for e in events] == list(range(1, len(OLD_ROWS) + 1))
        unreadable = next(i for i, (kind, data) in enumerate(OLD_ROWS) if "repr" in data)
        note = events[unreadable].data
        assert isinstance(note, LogLine) and "'turn' event recorded by an earlier airlock" in note.message
        assert [e.data for e in events] == [
            d if i != unreadable else d.model_copy(update={"message": note.message})
            for i, d in enumerate(OLD_EVENTS)
        ]
        assert events[-1].terminal
        assert [e.seq for e in await store.events("j-old", kind="sandbox")] == [4, 5, 6, 7, 8]
        assert len(await store.events("j-old", kind="log")) == 4
        job = await store.get("j-old")
        assert job is not None and job.state is JobState.INTERRUPTED
        # New events follow the upgraded ones.
        more = await store.append("j-old", LogLine(level=LogLevel.INFO, message="after", source="controller"))
        assert more.seq == len(OLD_ROWS) + 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        rows = dict(conn.execute("SELECT seq, data FROM events WHERE job_id = 'j-old'").fetchall())
    async with SqliteJobStore(path) as store:  # upgraded once: reopening rewrites nothing
        assert [e.data for e in await store.events("j-old")] == [e.data for e in events] + [more.data]
    with sqlite3.connect(path) as conn:
        assert dict(conn.execute("SELECT seq, data FROM events WHERE job_id = 'j-old'").fetchall()) == rows


async def test_a_file_of_a_newer_airlock_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    _write_old_file(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = SqliteJobStore(path)
    try:
        with pytest.raises(JobStoreError, match="newer than this airlock"):
            await store.events("j-old")
    finally:
        await store.aclose()

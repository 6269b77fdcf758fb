"""The governance RPCs (ApproveJob, RejectJob, PauseJob, ResumeJob, StepJob, InspectJob,
SignalWorkflow, GetWeave, VerifyJob, SubmitJob's until_stable) through a real ControllerServer
and ControllerClient on loopback, over a fake JobService: each answer arrives whole, and each
refusal of the service arrives as its status code.

:class:`FakeService` and the sample values are shared with the CLI tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pydantic import JsonValue

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.behaviour import ApprovalDecision
from airlock.controller import ControllerServer, JobNotAwaiting, JobNotFound, JobService, NotAnApprover
from airlock.jobs import (
    ApprovalWait,
    ControllerClient,
    ControllerError,
    FixedPointRun,
    Inspection,
    Job,
    JobEvent,
    JobState,
    LogLine,
    SandboxActivity,
)
from airlock.runner import StepInfo
from airlock.turn import (
    InferenceFinished,
    InferenceStarted,
    PendingCall,
    ProviderMessage,
    Role,
    SessionState,
    TextPart,
    ToolFinished,
    ToolStarted,
    ToolUsePart,
    TurnPaused,
)
from airlock.weave import ChainBreak, ChainReport, RecordDraft, RecordType, TurnRecord, Weave
from layer0 import LogLevel, ToolCallRecord, TurnInput
from tests.support.principals import Principals, principal, token_of

T0 = datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=UTC)
TOKEN = "t0ken"

CALLS = [
    PendingCall(
        tool_use_id="t9", name="bash", input={"command": "rm -rf out", "big": 2**60}, risks=["destructive"]
    ),
    PendingCall(tool_use_id="t10", name="http_get", input=None),
]


def awaiting_job(job_id: str = "j-wait", approvers: tuple[str, ...] = ("ana", "bob")) -> Job:
    """A job waiting for every one of ``approvers`` to approve two calls."""
    wait = ApprovalWait(
        calls=CALLS,
        iteration=2,
        requested_at=T0,
        deadline=T0 + timedelta(hours=1),
        approvers=list(approvers),
        strategy="all",
        on_timeout="reject",
    )
    return Job(
        id=job_id,
        agent="ops",
        state=JobState.AWAITING_APPROVAL,
        input=TurnInput.new("clean up the build"),
        queue="ops",
        workflow=job_id,
        created_at=T0,
        started_at=T0,
        resumes=1,
        approval=wait,
    )


def running_job(job_id: str = "j-run") -> Job:
    """A job whose turn runs."""
    return Job(
        id=job_id,
        agent="ops",
        state=JobState.RUNNING,
        input=TurnInput.new("count to three"),
        queue="ops",
        workflow="wf",
        created_at=T0,
        started_at=T0,
    )


def session_state() -> SessionState:
    """A session two model calls in, its last response asking for a call."""
    return SessionState(
        input=TurnInput.new("count to three"),
        started=True,
        messages=[
            ProviderMessage(role=Role.USER, content=[TextPart(text="count to three")]),
            ProviderMessage(
                role=Role.ASSISTANT,
                content=[
                    TextPart(text="I will count with bash"),
                    ToolUsePart(id="t1", name="bash", input={"command": "seq 3"}),
                ],
            ),
        ],
        iterations=2,
        tokens_in=120,
        tokens_out=30,
        cost=Decimal("0.0042"),
        tool_records=[ToolCallRecord(name="bash", duration=12, success=True)],
    )


#: What one step of ``running_job`` records.
STEP_EVENTS: list[JobEvent] = [
    JobEvent(job_id="j-run", seq=7, time=T0, data=SandboxActivity(event=InferenceStarted(iteration=3))),
    JobEvent(
        job_id="j-run",
        seq=8,
        time=T0 + timedelta(seconds=1),
        data=SandboxActivity(
            event=InferenceFinished(
                iteration=3,
                stop_reason="tool_use",
                tokens_in=50,
                tokens_out=9,
                cost=Decimal("0.0007"),
                total_tokens_in=170,
                total_tokens_out=39,
                total_cost=Decimal("0.0049"),
                duration_ms=40,
            )
        ),
    ),
    JobEvent(
        job_id="j-run",
        seq=9,
        time=T0 + timedelta(seconds=2),
        data=SandboxActivity(event=ToolStarted(tool_use_id="t2", name="bash", input={"command": "seq 3"})),
    ),
    JobEvent(
        job_id="j-run",
        seq=10,
        time=T0 + timedelta(seconds=3),
        data=SandboxActivity(
            event=ToolFinished(tool_use_id="t2", name="bash", duration_ms=5, success=True, output="1\n2\n3\n")
        ),
    ),
    JobEvent(
        job_id="j-run",
        seq=11,
        time=T0 + timedelta(seconds=4),
        data=LogLine(level=LogLevel.INFO, message="step requested", source="controller"),
    ),
    JobEvent(
        job_id="j-run",
        seq=12,
        time=T0 + timedelta(seconds=5),
        data=SandboxActivity(event=TurnPaused(iteration=3)),
    ),
]


def weave_records(key: bytes | None = None) -> list[TurnRecord]:
    """A boss job's weave: it delegates to calc (a child thread), waits for an approval, resumes,
    gets a signal and answers; one THOUGHT record."""
    weave = Weave(key=key)
    clock = iter(range(100))

    def add(
        job: str, agent: str, type: RecordType, kind: str, content: JsonValue, *deps: str, **usage: Any
    ) -> str:
        draft = RecordDraft(
            job=job,
            agent=agent,
            type=type,
            kind=kind,
            content=content,
            depends_on=deps,
            time=T0 + timedelta(seconds=next(clock)),
            **usage,
        )
        return weave.record(draft).id

    boss, calc = "j-boss", "j-calc"
    asked = add(
        boss,
        "boss",
        RecordType.SPEECH,
        "input",
        {"message": "What is 17 * 23? Ask calc.", "origin": "submit"},
    )
    thought = add(
        boss,
        "boss",
        RecordType.THOUGHT,
        "model_response",
        {
            "iteration": 1,
            "content": [
                {"type": "text", "text": "calc is better at this"},
                {"type": "tool_use", "id": "d1", "name": "delegate", "input": {"agent": "calc"}},
            ],
        },
        asked,
        tokens_in=40,
        tokens_out=12,
        cost=Decimal("0.0001"),
    )
    delegated = add(
        boss,
        "boss",
        RecordType.ACTION,
        "tool_call",
        {
            "tool_use_id": "d1",
            "tool": "delegate",
            "input": {"agent": "calc"},
            "output": "queued",
            "is_error": False,
        },
        thought,
    )
    child = add(
        calc,
        "calc",
        RecordType.SPEECH,
        "input",
        {"message": [{"type": "text", "text": "What is 17 * 23?"}]},
        delegated,
    )
    child = add(
        calc,
        "calc",
        RecordType.ACTION,
        "model_response",
        {
            "iteration": 1,
            "content": [{"type": "tool_use", "id": "c1", "name": "calculator", "input": {"e": "17*23"}}],
        },
        child,
        tokens_in=20,
        tokens_out=5,
    )
    child = add(
        calc,
        "calc",
        RecordType.ACTION,
        "tool_call",
        {
            "tool_use_id": "c1",
            "tool": "calculator",
            "input": {"e": "17*23"},
            "output": "391",
            "is_error": False,
        },
        child,
    )
    answered = add(
        calc,
        "calc",
        RecordType.SPEECH,
        "model_response",
        {"iteration": 2, "content": [{"type": "text", "text": "391"}]},
    )
    add(
        boss,
        "boss",
        RecordType.YIELD,
        "approval_requested",
        {"calls": [{"name": "bash"}], "approvers": ["ana"], "strategy": "any", "deadline": "x"},
    )
    add(
        boss,
        "boss",
        RecordType.YIELD,
        "approval_decision",
        {"approver": "ana", "approve": True, "comment": "fine", "time": T0.isoformat(), "automatic": False},
    )
    add(
        boss,
        "boss",
        RecordType.SILENCE,
        "resume",
        {"cause": "approval", "reason": "approved", "iteration": 1, "resume": 1},
    )
    add(
        boss,
        "boss",
        RecordType.SPEECH,
        "signal",
        {"signal_type": "feedback", "data": {"hint": "be brief"}, "from_job": None},
    )
    add(
        boss,
        "boss",
        RecordType.SPEECH,
        "model_response",
        {"iteration": 2, "content": [{"type": "text", "text": "17 * 23 = 391"}]},
        answered,
    )
    return weave.records


def child_job() -> Job:
    """The calc job the boss delegated to."""
    return Job(
        id="j-calc",
        agent="calc",
        state=JobState.SUCCEEDED,
        input=TurnInput.new("What is 17 * 23?"),
        queue="boss",
        parent_id="j-boss",
        origin="delegate",
        workflow="j-calc",
        created_at=T0,
    )


@dataclass
class FakeService:
    """Stands in for JobService behind a real ControllerServer: its jobs, what it was asked,
    and the service's own refusals (JobNotFound, JobNotAwaiting, NotAnApprover)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    states: dict[str, SessionState] = field(default_factory=dict)
    records: dict[str, list[TurnRecord]] = field(default_factory=dict)
    reports: dict[str, ChainReport] = field(default_factory=dict)
    delivered: dict[str, list[str]] = field(default_factory=dict)
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    signals: int = 0
    weaves: Any = field(default_factory=lambda: SimpleNamespace(key=None))
    runner: Any = field(default_factory=lambda: SimpleNamespace(config=SimpleNamespace(agents={})))

    def add(self, *jobs: Job) -> FakeService:
        for job in jobs:
            self.jobs[job.id] = job
        return self

    async def get(self, job_id: str, tenant: str | None = None) -> Job:
        if job_id not in self.jobs or tenant not in (None, self.jobs[job_id].tenant):
            raise JobNotFound(f"no job {job_id!r}")
        return self.jobs[job_id]

    async def submit(self, agent: str, input: TurnInput, **options: Any) -> Job:
        self.calls.append(("submit", (agent, options)))
        job = Job(
            id="j-new",
            agent=agent,
            state=JobState.QUEUED,
            input=input,
            queue=agent,
            workflow="j-new",
            created_at=T0,
            fixed_point=options.get("until_stable"),
        )
        return self.add(job).jobs[job.id]

    async def approve(self, job_id: str, approver: str, comment: str = "") -> Job:
        return await self._decide(job_id, approver, True, comment)

    async def reject(self, job_id: str, approver: str, reason: str) -> Job:
        return await self._decide(job_id, approver, False, reason)

    async def _decide(self, job_id: str, approver: str, approve: bool, comment: str) -> Job:
        """Strategy ``all``: one rejection rejects; every approver's approval approves."""
        self.calls.append(("approve" if approve else "reject", (job_id, approver, comment)))
        job = await self.get(job_id)
        wait = job.approval
        if job.state is not JobState.AWAITING_APPROVAL or wait is None:
            raise JobNotAwaiting(f"job {job_id} is {job.state.value}: it waits for no approval")
        if approver not in wait.approvers:
            raise NotAnApprover(f"{approver!r} is not an approver of this agent; its approvers: ana, bob")
        decision = ApprovalDecision(approver=approver, approve=approve, comment=comment, time=T0)
        wait = wait.model_copy(update={"decisions": [*wait.decisions, decision]})
        approved = {d.approver for d in wait.decisions if d.approve}
        outcome = "rejected" if not approve else "approved" if approved == set(wait.approvers) else None
        update: dict[str, Any] = {"approval": wait.model_copy(update={"outcome": outcome})}
        if outcome is not None:
            update["state"] = JobState.QUEUED
        self.jobs[job_id] = job.model_copy(update=update)
        return self.jobs[job_id]

    async def _turn(self, job_id: str) -> None:
        await self.get(job_id)
        if job_id not in self.running:
            raise JobNotAwaiting(f"job {job_id} has no turn running in a sandbox now")

    async def pause(self, job_id: str) -> None:
        await self._turn(job_id)
        self.calls.append(("pause", (job_id,)))
        self.paused.add(job_id)

    async def resume(self, job_id: str) -> None:
        await self._turn(job_id)
        self.calls.append(("resume", (job_id,)))
        self.paused.discard(job_id)

    async def step(self, job_id: str) -> tuple[StepInfo, list[JobEvent]]:
        await self._turn(job_id)
        if job_id not in self.paused:
            raise JobNotAwaiting(f"job {job_id}: the turn is not paused")
        self.calls.append(("step", (job_id,)))
        return StepInfo(complete=False, text="counting", tools=["bash"]), list(STEP_EVENTS)

    async def inspect(self, job_id: str) -> Inspection:
        job = await self.get(job_id)
        pending = (
            list(job.approval.calls) if job.approval is not None and job.approval.outcome is None else []
        )
        return Inspection(
            job=job,
            state=self.states.get(job_id),
            running=job_id in self.running,
            paused=job_id in self.paused,
            pending=pending,
        )

    async def signal(
        self, workflow: str, signal_type: str, data: JsonValue = None, tenant: str = "default"
    ) -> tuple[int, list[str]]:
        self.calls.append(("signal", (workflow, signal_type, data)))
        self.signals += 1
        return self.signals, self.delivered.get(workflow, [])

    async def weave(self, job_id: str) -> tuple[str, list[TurnRecord]]:
        job = await self.get(job_id)
        root = job.parent_id or job.id
        return root, self.records.get(root, [])

    async def verify(self, job_id: str) -> tuple[str, ChainReport]:
        root, records = await self.weave(job_id)
        return root, self.reports.get(root, ChainReport(ok=True, records=len(records), breaks=[]))


def with_samples(service: FakeService | None = None) -> FakeService:
    """A fake holding the sample jobs: awaiting (j-wait), running (j-run, its session known),
    and the boss tree (j-boss, j-calc) with its weave."""
    service = service or FakeService()
    boss = running_job("j-boss").model_copy(
        update={"agent": "boss", "state": JobState.SUCCEEDED, "children": ["j-calc"]}
    )
    service.add(awaiting_job(), running_job(), boss, child_job())
    service.running.add("j-run")
    service.states["j-run"] = session_state()
    service.records["j-boss"] = weave_records()
    service.delivered["wf"] = ["j-run"]
    return service


#: Who calls: two approvers, one with the approver role who is not among the jobs' approvers,
#: a viewer, and the administrator who steers the sample jobs (they have no submitter).
PEOPLE = Principals(
    principal("ana", "approver", "viewer"),
    principal("bob", "approver", "viewer"),
    principal("eve", "approver", "viewer"),
    principal("vic", "viewer"),
    principal("root", "admin"),
)


@contextlib.asynccontextmanager
async def serving(service: FakeService, caller: str = "root") -> AsyncIterator[ControllerClient]:
    """A real server over ``service`` on a free loopback port, and a client of it calling as
    ``caller`` (one of :data:`PEOPLE`)."""
    async with (
        ControllerServer(cast(JobService, service), TOKEN, "127.0.0.1:0", authenticator=PEOPLE) as server,
        ControllerClient(server.address, token_of(caller)) as client,
    ):
        yield client


# -- approvals -------------------------------------------------------------------------------------


async def test_approvals_arrive_whole_and_the_job_comes_back_as_the_service_left_it() -> None:
    service = with_samples()
    async with serving(service, "ana") as ana, serving(service, "bob") as bob:
        job = await ana.approve("j-wait", "looks right")
        assert job == service.jobs["j-wait"] and job.state is JobState.AWAITING_APPROVAL
        assert job.approval is not None and job.approval.outcome is None
        assert [(d.approver, d.approve, d.comment) for d in job.approval.decisions] == [
            ("ana", True, "looks right")
        ]
        job = await bob.approve("j-wait")
        assert job == service.jobs["j-wait"] and job.state is JobState.QUEUED
        assert job.approval is not None and job.approval.outcome == "approved"
        assert job.approval.calls == CALLS and job.resumes == 1
    assert service.calls == [
        ("approve", ("j-wait", "ana", "looks right")),
        ("approve", ("j-wait", "bob", "")),
    ]


async def test_a_rejection_carries_its_reason() -> None:
    service = with_samples()
    async with serving(service, "bob") as client:
        job = await client.reject("j-wait", "do not delete the build")
    assert job.state is JobState.QUEUED and job.approval is not None and job.approval.outcome == "rejected"
    assert job.approval.decisions[-1].comment == "do not delete the build"
    assert service.calls == [("reject", ("j-wait", "bob", "do not delete the build"))]


@pytest.mark.parametrize(
    ("job_id", "approver", "code", "says"),
    [
        ("j-nope", "ana", "NOT_FOUND", "no job 'j-nope'"),
        ("j-run", "ana", "FAILED_PRECONDITION", "job j-run is running: it waits for no approval"),
        ("j-wait", "eve", "PERMISSION_DENIED", "'eve' is not an approver"),
        ("j-wait", "vic", "PERMISSION_DENIED", "needs permission jobs.approve"),
    ],
)
async def test_a_refused_decision_has_its_status_code(
    job_id: str, approver: str, code: str, says: str
) -> None:
    service = with_samples()
    async with serving(service, approver) as client:
        for decide in (client.approve(job_id), client.reject(job_id, "no")):
            with pytest.raises(ControllerError, match=says) as caught:
                await decide
            assert caught.value.code == code
    assert service.jobs["j-wait"] == awaiting_job()


async def test_a_decision_is_the_authenticated_principals_and_names_no_one_else() -> None:
    service = with_samples()
    async with serving(service, "eve") as client:
        request = cpb.ApproveJobRequest(id="j-wait", approver="ana")
        with pytest.raises(ControllerError, match="eve may not decide as 'ana'") as caught:
            await client._call("ApproveJob", request)
    assert caught.value.code == "PERMISSION_DENIED" and caught.value.metadata["permission"] == "jobs.approve"
    assert service.calls == []


async def test_a_rejection_without_a_reason_is_invalid_and_never_reaches_the_service() -> None:
    service = with_samples()
    async with serving(service) as client:
        with pytest.raises(ControllerError, match="reason: is required") as caught:
            await client.reject("j-wait", "  ")
    assert caught.value.code == "INVALID_ARGUMENT" and service.calls == []


# -- pause, resume, step, inspect ---------------------------------------------------------------------


async def test_pause_step_and_resume_a_running_turn() -> None:
    service = with_samples()
    async with serving(service) as client:
        with pytest.raises(ControllerError, match="not paused") as caught:
            await client.step("j-run")
        assert caught.value.code == "FAILED_PRECONDITION"
        await client.pause("j-run")
        info, events = await client.step("j-run")
        assert info == StepInfo(complete=False, text="counting", tools=["bash"])
        assert events == STEP_EVENTS
        await client.resume("j-run")
    assert [name for name, _ in service.calls] == ["pause", "step", "resume"]
    assert service.paused == set()


@pytest.mark.parametrize("verb", ["pause", "resume", "step"])
async def test_controls_of_a_job_without_a_running_turn_are_refused(verb: str) -> None:
    async with serving(with_samples()) as client:
        with pytest.raises(ControllerError, match="has no turn running") as caught:
            await getattr(client, verb)("j-wait")
        assert caught.value.code == "FAILED_PRECONDITION"
        with pytest.raises(ControllerError, match="no job 'j-nope'") as caught:
            await getattr(client, verb)("j-nope")
        assert caught.value.code == "NOT_FOUND"


async def test_inspect_returns_the_session_and_the_pending_calls() -> None:
    service = with_samples()
    service.paused.add("j-run")
    async with serving(service) as client:
        found = await client.inspect("j-run")
        assert found == Inspection(
            job=running_job(), state=session_state(), running=True, paused=True, pending=[]
        )
        waiting = await client.inspect("j-wait")
        assert waiting.state is None and not waiting.running and not waiting.paused
        assert waiting.pending == CALLS and waiting.job == awaiting_job()
        with pytest.raises(ControllerError, match="no job") as caught:
            await client.inspect("j-nope")
        assert caught.value.code == "NOT_FOUND"


# -- signals -----------------------------------------------------------------------------------------


async def test_a_signal_reaches_the_service_with_its_data_whole() -> None:
    service = with_samples()
    async with serving(service) as client:
        assert await client.signal("wf", "budget", {"max_turns": 3, "big": 2**60, "f": 1.5}) == (1, ["j-run"])
        assert await client.signal("other", "feedback") == (2, [])
    assert service.calls == [
        ("signal", ("wf", "budget", {"max_turns": 3, "big": 2**60, "f": 1.5})),
        ("signal", ("other", "feedback", None)),
    ]


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        (cpb.SignalWorkflowRequest(signal_type="x"), "workflow: is required"),
        (cpb.SignalWorkflowRequest(workflow="wf"), "signal_type: is required"),
        (
            cpb.SignalWorkflowRequest(workflow="wf", signal_type="x", data=pb.Json(text="{nope")),
            "data: invalid JSON",
        ),
    ],
)
async def test_a_bad_signal_is_invalid(request_: cpb.SignalWorkflowRequest, says: str) -> None:
    service = with_samples()
    async with serving(service) as client:
        with pytest.raises(ControllerError, match=says) as caught:
            await client._call("SignalWorkflow", request_)
    assert caught.value.code == "INVALID_ARGUMENT" and service.calls == []


# -- the audit -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, b"audit-key"], ids=["unsealed", "sealed"])
async def test_the_weave_of_any_job_of_the_tree_arrives_whole(key: bytes | None) -> None:
    service = with_samples()
    service.records["j-boss"] = weave_records(key)
    async with serving(service) as client:
        assert await client.weave("j-calc") == ("j-boss", service.records["j-boss"])
        assert await client.weave("j-boss") == ("j-boss", service.records["j-boss"])
        with pytest.raises(ControllerError) as caught:
            await client.weave("j-nope")
        assert caught.value.code == "NOT_FOUND"


async def test_verify_reports_breaks_and_whether_seals_were_checked() -> None:
    service = with_samples()
    async with serving(service) as client:
        assert await client.verify("j-calc") == ("j-boss", ChainReport(ok=True, records=12, breaks=[]), False)
        service.weaves.key = b"audit-key"
        broken = ChainReport(
            ok=False,
            records=12,
            breaks=[
                ChainBreak(position=3, record_id="j-calc:1", problem="record j-calc:1 was modified"),
                ChainBreak(position=9, record_id="j-boss:6", problem="record j-boss:6 is unsealed"),
            ],
        )
        service.reports["j-boss"] = broken
        assert await client.verify("j-boss") == ("j-boss", broken, True)
        with pytest.raises(ControllerError) as caught:
            await client.verify("j-nope")
        assert caught.value.code == "NOT_FOUND"


# -- submit until stable ------------------------------------------------------------------------------

X_INPUT = wire.input_to_proto(TurnInput.new("x"))


async def test_submit_until_stable_passes_the_bounds() -> None:
    service = FakeService()
    async with serving(service) as client:
        job = await client.submit("calc", "x", until_stable=FixedPointRun(max_iterations=5, window=2))
        assert job.fixed_point == FixedPointRun(max_iterations=5, window=2)
        await client.submit("calc", "x")
        request = cpb.SubmitJobRequest(agent="calc", input=X_INPUT, until_stable=cpb.UntilStable())
        await client._call("SubmitJob", request)
    sent = [options.get("until_stable") for _, (_, options) in service.calls]
    assert sent == [
        FixedPointRun(max_iterations=5, window=2),
        None,
        FixedPointRun(max_iterations=10, window=3),
    ]


@pytest.mark.parametrize(
    ("bounds", "says"),
    [
        ({"window": 1}, "until_stable.window: Input should be greater than or equal to 2"),
        ({"max_iterations": 5000}, "until_stable.max_iterations: Input should be less than or equal to 1000"),
    ],
)
async def test_submit_with_bad_bounds_is_invalid(bounds: dict[str, int], says: str) -> None:
    service = FakeService()
    async with serving(service) as client:
        request = cpb.SubmitJobRequest(agent="calc", input=X_INPUT, until_stable=cpb.UntilStable(**bounds))
        with pytest.raises(ControllerError, match=says) as caught:
            await client._call("SubmitJob", request)
    assert caught.value.code == "INVALID_ARGUMENT" and service.calls == []

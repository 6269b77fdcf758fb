"""Jobs, states, filters, approvals and turn records to and from the controller's protobuf
messages (job events: ``_event_wire``).

Every conversion is lossless for the values the models allow, except a fixed-point run's
``outputs``: they stay on the controller (the job's output is the chosen one).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import get_args

from google.protobuf.timestamp_pb2 import Timestamp

from airlock import wire as cv
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.behaviour import ApprovalDecision
from airlock.behaviour.approval import OnTimeout, Outcome, Strategy
from airlock.sandbox import ISOLATION_STATUSES, IsolationProof, IsolationStatus
from airlock.weave import FixedPointExit, RecordType, TurnRecord
from layer0 import decimal_to_str

from ._convert_effects import report_from_proto, report_to_proto
from ._errors import JobErrorKind
from ._model import (
    ApprovalWait,
    FixedPointRun,
    Job,
    JobError,
    JobFilter,
    JobOrigin,
    JobState,
    TreeBudgetUse,
    TreeDecision,
)
from ._sandboxes import SandboxInfo, SandboxPhase

#: JobState ↔ ``JOB_STATE_*``.
JOB_STATE: cv.WireEnum[JobState] = cv.WireEnum(cpb.JobState, "JOB_STATE_", JobState, "job state")
#: An approval's outcome ↔ ``APPROVAL_OUTCOME_*`` (UNSPECIFIED: undecided).
APPROVAL_OUTCOME: cv.WireEnum[Outcome] = cv.WireEnum(
    cpb.ApprovalOutcome, "APPROVAL_OUTCOME_", ("approved", "rejected"), "approval outcome"
)
#: A backend's isolation status ↔ ``ISOLATION_STATUS_*``.
ISOLATION_STATUS: cv.WireEnum[IsolationStatus] = cv.WireEnum(
    cpb.IsolationStatus, "ISOLATION_STATUS_", ISOLATION_STATUSES, "isolation status"
)
#: How a job came to be ↔ ``JOB_ORIGIN_*``.
JOB_ORIGIN: cv.WireEnum[JobOrigin] = cv.WireEnum(
    cpb.JobOrigin, "JOB_ORIGIN_", get_args(JobOrigin), "job origin"
)
#: An approval wait's strategy ↔ ``APPROVAL_STRATEGY_*``.
APPROVAL_STRATEGY: cv.WireEnum[Strategy] = cv.WireEnum(
    cpb.ApprovalStrategy, "APPROVAL_STRATEGY_", get_args(Strategy), "approval strategy"
)
#: What an approval's timeout decides ↔ ``APPROVAL_TIMEOUT_ACTION_*``.
APPROVAL_TIMEOUT_ACTION: cv.WireEnum[OnTimeout] = cv.WireEnum(
    cpb.ApprovalTimeoutAction, "APPROVAL_TIMEOUT_ACTION_", get_args(OnTimeout), "approval timeout action"
)
#: Why a fixed-point run stopped ↔ ``FIXED_POINT_EXIT_*`` (UNSPECIFIED: it runs).
FIXED_POINT_EXIT: cv.WireEnum[FixedPointExit] = cv.WireEnum(
    cpb.FixedPointExit, "FIXED_POINT_EXIT_", get_args(FixedPointExit), "fixed-point exit"
)
#: A tree budget's decision ↔ ``TREE_BUDGET_DECISION_*``.
TREE_BUDGET_DECISION: cv.WireEnum[TreeDecision] = cv.WireEnum(
    cpb.TreeBudgetDecision, "TREE_BUDGET_DECISION_", get_args(TreeDecision), "tree budget decision"
)
#: A job error's kind ↔ ``JOB_ERROR_KIND_*``.
JOB_ERROR_KIND: cv.WireEnum[JobErrorKind] = cv.WireEnum(
    cpb.JobErrorKind, "JOB_ERROR_KIND_", JobErrorKind, "job error kind"
)
#: A turn record's type ↔ ``RECORD_TYPE_*``.
RECORD_TYPE: cv.WireEnum[RecordType] = cv.WireEnum(cpb.RecordType, "RECORD_TYPE_", RecordType, "record type")


def state_to_proto(state: JobState) -> cpb.JobState.ValueType:
    """The wire enum of a state."""
    return JOB_STATE.to_proto(state)  # type: ignore[no-any-return]


def state_from_proto(value: int) -> JobState:
    """A state from the wire enum.

    Raises:
        ValueError: an unknown or unspecified value.
    """
    try:
        return JOB_STATE.from_proto(value)
    except cv.MalformedMessage:
        raise ValueError(f"unknown job state {value}") from None


def timestamp_to_proto(value: datetime) -> Timestamp:
    """An aware datetime as a Timestamp (UTC, to the microsecond)."""
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC).replace(tzinfo=None))
    return ts


def timestamp_from_proto(value: Timestamp) -> datetime:
    """A Timestamp as an aware UTC datetime."""
    return value.ToDatetime().replace(tzinfo=UTC)


def job_to_proto(job: Job) -> cpb.Job:
    """A job on the wire."""
    message = cpb.Job(
        id=job.id,
        agent=job.agent,
        state=state_to_proto(job.state),
        input=cv.input_to_proto(job.input),
        queue=job.queue,
        parent_id=job.parent_id or "",
        origin=JOB_ORIGIN.to_proto(job.origin),
        workflow=job.workflow,
        created_at=timestamp_to_proto(job.created_at),
        children=job.children,
        tenant=job.tenant,
        owner=job.owner or "",
        forked_from=job.forked_from or "",
        fork_point=job.fork_point or "",
        sandbox=job.sandbox or "",
    )
    if job.output is not None:
        message.output.CopyFrom(cv.output_to_proto(job.output))
    if job.error is not None:
        message.error.CopyFrom(job_error_to_proto(job.error))
    if job.started_at is not None:
        message.started_at.CopyFrom(timestamp_to_proto(job.started_at))
    if job.finished_at is not None:
        message.finished_at.CopyFrom(timestamp_to_proto(job.finished_at))
    if job.max_duration_ms is not None:
        message.max_duration.CopyFrom(cv.duration_to_proto(job.max_duration_ms))
    if job.effects is not None:
        message.effects.CopyFrom(report_to_proto(job.effects))
    message.resumes = job.resumes
    if job.approval is not None:
        message.approval.CopyFrom(approval_to_proto(job.approval))
    if job.fixed_point is not None:
        message.fixed_point.CopyFrom(fixed_point_to_proto(job.fixed_point))
    if job.tree_budget is not None:
        message.tree_budget.CopyFrom(tree_use_to_proto(job.tree_budget))
    return message


def job_from_proto(message: cpb.Job) -> Job:
    """A job from the wire.

    Raises:
        MalformedMessage: the input or output does not decode.
    """
    return Job(
        id=message.id,
        agent=message.agent,
        state=state_from_proto(message.state),
        input=cv.input_from_proto(message.input),
        output=cv.output_from_proto(message.output) if message.HasField("output") else None,
        error=job_error_from_proto(message.error) if message.HasField("error") else None,
        queue=message.queue,
        parent_id=message.parent_id or None,
        origin=JOB_ORIGIN.from_proto(message.origin, "origin"),
        workflow=message.workflow,
        created_at=timestamp_from_proto(message.created_at),
        started_at=timestamp_from_proto(message.started_at) if message.HasField("started_at") else None,
        finished_at=timestamp_from_proto(message.finished_at) if message.HasField("finished_at") else None,
        max_duration_ms=cv.duration_from_proto(message.max_duration)
        if message.HasField("max_duration")
        else None,
        children=list(message.children),
        effects=report_from_proto(message.effects) if message.HasField("effects") else None,
        resumes=message.resumes,
        tenant=message.tenant or "default",
        owner=message.owner or None,
        forked_from=message.forked_from or None,
        fork_point=message.fork_point or None,
        sandbox=message.sandbox or None,
        approval=approval_from_proto(message.approval) if message.HasField("approval") else None,
        fixed_point=fixed_point_from_proto(message.fixed_point) if message.HasField("fixed_point") else None,
        tree_budget=tree_use_from_proto(message.tree_budget) if message.HasField("tree_budget") else None,
    )


def tree_use_to_proto(use: TreeBudgetUse) -> cpb.TreeBudgetChanged:
    """A tree's spend and decision on the wire (also a ``tree_budget`` event's, with its reason)."""
    return cpb.TreeBudgetChanged(
        decision=TREE_BUDGET_DECISION.to_proto(use.decision),
        spent=str(use.spent),
        tokens=use.tokens,
        elapsed_ms=use.elapsed_ms,
        max_cost=None if use.max_cost is None else str(use.max_cost),
        max_tokens=use.max_tokens,
        max_duration_ms=use.max_duration_ms,
        model=use.model,
    )


def tree_use_from_proto(message: cpb.TreeBudgetChanged) -> TreeBudgetUse:
    """A tree's spend and decision from the wire.

    Raises:
        ValidationError: the decision or an amount does not validate.
    """
    has = message.HasField
    return TreeBudgetUse.model_validate(
        {
            "decision": TREE_BUDGET_DECISION.from_proto(message.decision, "decision"),
            "spent": message.spent,
            "tokens": message.tokens,
            "elapsed_ms": message.elapsed_ms,
            "max_cost": message.max_cost if has("max_cost") else None,
            "max_tokens": message.max_tokens if has("max_tokens") else None,
            "max_duration_ms": message.max_duration_ms if has("max_duration_ms") else None,
            "model": message.model if has("model") else None,
        }
    )


def job_error_to_proto(error: JobError) -> cpb.JobError:
    """A job's error on the wire."""
    return cpb.JobError(
        kind=JOB_ERROR_KIND.to_proto(error.kind), message=error.message, retryable=error.retryable
    )


def job_error_from_proto(message: cpb.JobError, path: str = "error") -> JobError:
    """A job's error from the wire.

    Raises:
        MalformedMessage: an unspecified or unknown kind.
    """
    kind = JOB_ERROR_KIND.from_proto(message.kind, f"{path}.kind")
    return JobError(kind=kind, message=message.message, retryable=message.retryable)


def filter_from_proto(message: cpb.ListJobsRequest) -> JobFilter:
    """A ListJobs request as a filter (limit 0 → 50, capped at 1000).

    Raises:
        MalformedMessage: an unknown or unspecified state (one problem per such ``states[i]``).
    """
    states = []
    problems = []
    for i, value in enumerate(message.states):
        try:
            states.append(state_from_proto(value))
        except ValueError as e:
            problems.append(cv.Problem(f"states[{i}]", str(e)))
    if problems:
        raise cv.MalformedMessage(problems=problems)
    return JobFilter(
        states=frozenset(states),
        agent=message.agent or None,
        session=message.session or None,
        parent_id=message.parent_id or None,
        workflow=message.workflow or None,
        limit=min(message.page_size or 50, 1000),
        before_id=message.before_id or None,
        tenant=message.tenant or None,
    )


def filter_to_proto(where: JobFilter) -> cpb.ListJobsRequest:
    """A filter as a ListJobs request."""
    return cpb.ListJobsRequest(
        states=[state_to_proto(s) for s in sorted(where.states)],
        agent=where.agent or "",
        session=where.session or "",
        parent_id=where.parent_id or "",
        workflow=where.workflow or "",
        page_size=where.limit,
        before_id=where.before_id or "",
        tenant=where.tenant or "",
    )


# -- approvals ---------------------------------------------------------------------------------------


def decision_to_proto(decision: ApprovalDecision) -> cpb.ApprovalDecision:
    """One approver's decision on the wire."""
    return cpb.ApprovalDecision(
        approver=decision.approver,
        approve=decision.approve,
        comment=decision.comment,
        time=timestamp_to_proto(decision.time),
        automatic=decision.automatic,
    )


def decision_from_proto(message: cpb.ApprovalDecision) -> ApprovalDecision:
    """One approver's decision from the wire."""
    return ApprovalDecision(
        approver=message.approver,
        approve=message.approve,
        comment=message.comment,
        time=timestamp_from_proto(message.time),
        automatic=message.automatic,
    )


def outcome_to_proto(outcome: Outcome | None) -> cpb.ApprovalOutcome.ValueType:
    """An approval outcome's wire enum (None: UNSPECIFIED)."""
    if outcome is None:
        return cpb.APPROVAL_OUTCOME_UNSPECIFIED
    return APPROVAL_OUTCOME.to_proto(outcome)  # type: ignore[no-any-return]


def outcome_from_proto(value: int, path: str = "outcome") -> Outcome | None:
    """An approval outcome from its wire enum (UNSPECIFIED: None).

    Raises:
        MalformedMessage: an unknown value.
    """
    return None if value == 0 else APPROVAL_OUTCOME.from_proto(value, path)


def approval_to_proto(wait: ApprovalWait) -> cpb.ApprovalWait:
    """What a job waits (or waited) on a person for, on the wire."""
    return cpb.ApprovalWait(
        calls=[cv.pending_call_to_proto(c) for c in wait.calls],
        iteration=wait.iteration,
        requested_at=timestamp_to_proto(wait.requested_at),
        deadline=timestamp_to_proto(wait.deadline),
        approvers=wait.approvers,
        strategy=APPROVAL_STRATEGY.to_proto(wait.strategy),
        on_timeout=APPROVAL_TIMEOUT_ACTION.to_proto(wait.on_timeout),
        decisions=[decision_to_proto(d) for d in wait.decisions],
        outcome=outcome_to_proto(wait.outcome),
    )


def approval_from_proto(message: cpb.ApprovalWait) -> ApprovalWait:
    """What a job waits on a person for, from the wire.

    Raises:
        MalformedMessage: a value that does not validate (located under ``approval``).
    """
    with cv.located("approval"):
        return ApprovalWait.model_validate(
            {
                "calls": [cv.pending_call_from_proto(c) for c in message.calls],
                "iteration": message.iteration,
                "requested_at": timestamp_from_proto(message.requested_at),
                "deadline": timestamp_from_proto(message.deadline),
                "approvers": list(message.approvers),
                "strategy": APPROVAL_STRATEGY.from_proto(message.strategy, "strategy"),
                "on_timeout": APPROVAL_TIMEOUT_ACTION.from_proto(message.on_timeout, "on_timeout"),
                "decisions": [decision_from_proto(d) for d in message.decisions],
                "outcome": outcome_from_proto(message.outcome),
            }
        )


# -- fixed-point runs --------------------------------------------------------------------------------


def fixed_point_to_proto(run: FixedPointRun) -> cpb.FixedPointRun:
    """A fixed-point run's settings, hashes and exit (not its outputs) on the wire."""
    message = cpb.FixedPointRun(
        max_iterations=run.max_iterations,
        window=run.window,
        hashes=[cpb.IterationHashes(pre=pre, post=post) for pre, post in run.hashes],
        exit=FIXED_POINT_EXIT.to_proto(run.exit)
        if run.exit is not None
        else cpb.FIXED_POINT_EXIT_UNSPECIFIED,
    )
    if run.chosen is not None:
        message.chosen = run.chosen
    return message


def fixed_point_from_proto(message: cpb.FixedPointRun) -> FixedPointRun:
    """A fixed-point run from the wire (``outputs`` empty: they stay on the controller).

    Raises:
        MalformedMessage: a value that does not validate (located under ``fixed_point``).
    """
    with cv.located("fixed_point"):
        return FixedPointRun.model_validate(
            {
                "max_iterations": message.max_iterations,
                "window": message.window,
                "hashes": [(h.pre, h.post) for h in message.hashes],
                "exit": FIXED_POINT_EXIT.from_proto(message.exit, "exit") if message.exit else None,
                "chosen": message.chosen if message.HasField("chosen") else None,
            }
        )


def until_stable_from_proto(message: cpb.UntilStable) -> FixedPointRun:
    """A SubmitJob request's ``until_stable`` as the run's settings (0: the default).

    Raises:
        MalformedMessage: a bound out of range (located under ``until_stable``).
    """
    defaults = FixedPointRun()
    with cv.located("until_stable"):
        return FixedPointRun(
            max_iterations=message.max_iterations or defaults.max_iterations,
            window=message.window or defaults.window,
        )


def until_stable_to_proto(run: FixedPointRun) -> cpb.UntilStable:
    """A fixed-point run's settings as a SubmitJob request's ``until_stable``."""
    return cpb.UntilStable(max_iterations=run.max_iterations, window=run.window)


# -- turn records ------------------------------------------------------------------------------------


def record_to_proto(record: TurnRecord) -> cpb.TurnRecord:
    """A turn record on the wire (cost as decimal text, content as JSON text)."""
    message = cpb.TurnRecord(
        id=record.id,
        job=record.job,
        agent=record.agent,
        n=record.n,
        type=RECORD_TYPE.to_proto(record.type),
        kind=record.kind,
        clock=record.clock,
        depends_on=record.depends_on,
        state_hash_pre=record.state_hash_pre,
        state_hash_post=record.state_hash_post,
        digest=record.digest,
        content=cv.json_to_proto(record.content),
        tokens_in=record.tokens_in,
        tokens_out=record.tokens_out,
        cost=decimal_to_str(record.cost),
        time=timestamp_to_proto(record.time),
        hash=record.hash,
    )
    if record.prev_hash is not None:
        message.prev_hash = record.prev_hash
    if record.seal is not None:
        message.seal = record.seal
    return message


def record_from_proto(message: cpb.TurnRecord) -> TurnRecord:
    """A turn record from the wire.

    Raises:
        MalformedMessage: an unknown type, bad JSON or decimal text, or a value that does not
            validate.
    """
    with cv.located("record"):
        return TurnRecord.model_validate(
            {
                "id": message.id,
                "job": message.job,
                "agent": message.agent,
                "n": message.n,
                "type": RECORD_TYPE.from_proto(message.type, "type"),
                "kind": message.kind,
                "clock": message.clock,
                "depends_on": tuple(message.depends_on),
                "state_hash_pre": message.state_hash_pre,
                "state_hash_post": message.state_hash_post,
                "digest": message.digest,
                "content": cv.json_from_proto(message.content, present=message.HasField("content")),
                "tokens_in": message.tokens_in,
                "tokens_out": message.tokens_out,
                "cost": message.cost or "0",
                "time": timestamp_from_proto(message.time),
                "prev_hash": message.prev_hash if message.HasField("prev_hash") else None,
                "hash": message.hash,
                "seal": message.seal if message.HasField("seal") else None,
            }
        )


def isolation_proof_to_proto(proof: IsolationProof) -> cpb.IsolationProof:
    """A backend's isolation proof on the wire."""
    return cpb.IsolationProof(
        backend=proof.backend,
        scope=proof.scope,
        status=ISOLATION_STATUS.to_proto(proof.status),
        checked_at=timestamp_to_proto(proof.checked_at),
        reason=proof.reason,
        evidence=list(proof.evidence),
    )


def isolation_proof_from_proto(message: cpb.IsolationProof) -> IsolationProof:
    """A backend's isolation proof from the wire.

    Raises:
        MalformedMessage: an unknown or unspecified status.
    """
    return IsolationProof(
        backend=message.backend,
        scope=message.scope,
        status=ISOLATION_STATUS.from_proto(message.status, "status"),
        checked_at=timestamp_from_proto(message.checked_at),
        reason=message.reason,
        evidence=tuple(message.evidence),
    )


_SANDBOX_STATES: dict[SandboxPhase, cpb.SandboxState.ValueType] = {
    "running": cpb.SANDBOX_STATE_RUNNING,
    "paused": cpb.SANDBOX_STATE_PAUSED,
}


def sandbox_to_proto(sandbox: SandboxInfo) -> cpb.Sandbox:
    """A long-lived sandbox on the wire."""
    message = cpb.Sandbox(
        id=sandbox.id,
        agent=sandbox.agent,
        tenant=sandbox.tenant,
        owner=sandbox.owner or "",
        state=_SANDBOX_STATES[sandbox.state],
        manifest=sandbox.manifest or "",
        created_at=timestamp_to_proto(sandbox.created_at),
        last_used_at=timestamp_to_proto(sandbox.last_used_at),
        spec_digest=sandbox.spec_digest,
    )
    if sandbox.ttl_s is not None:
        message.ttl.FromMilliseconds(round(sandbox.ttl_s * 1000))
    return message


def sandbox_from_proto(message: cpb.Sandbox) -> SandboxInfo:
    """A long-lived sandbox from the wire.

    Raises:
        MalformedMessage: its state is not one this client knows.
    """
    states = {v: k for k, v in _SANDBOX_STATES.items()}
    state = states.get(message.state)
    if state is None:
        raise cv.MalformedMessage(f"unknown sandbox state {message.state}", path="state")
    return SandboxInfo(
        id=message.id,
        agent=message.agent,
        tenant=message.tenant,
        owner=message.owner or None,
        state=state,
        manifest=message.manifest or None,
        ttl_s=message.ttl.ToMilliseconds() / 1000 if message.HasField("ttl") else None,
        created_at=timestamp_from_proto(message.created_at),
        last_used_at=timestamp_from_proto(message.last_used_at),
        spec_digest=message.spec_digest,
    )

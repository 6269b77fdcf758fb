"""The job record, its states and its events (pydantic; the store and the wire map to these).

A job's events are one discriminated union, :data:`JobEventData`, tagged by ``kind``:

- ``state``: the job moved from one state to another (:class:`StateChanged`);
- ``sandbox``: something its sandbox reported — a turn event or a proxy decision
  (:class:`SandboxActivity`, holding an ``airlock.sandbox`` SandboxEvent, itself tagged by
  ``type``); a turn's log lines are ``log`` events instead;
- ``effect``: one declared effect was applied, refused or skipped (:class:`EffectApplied`);
- ``child``: a delegate/handoff child job started or finished (:class:`ChildJobChanged`);
- ``signal``: a signal was sent by, or to, the job's workflow (:class:`SignalRecorded`);
- ``log``: a log line from the controller, the turn or a Log effect (:class:`LogLine`);
- ``approval``: tool calls began to wait for a person, one was decided, or the wait ended
  (:class:`ApprovalChanged`);
- ``resume``: the job continued in a fresh sandbox from its last checkpoint (:class:`JobResumed`);
- ``tree_budget``: the budget decision of the tree the job roots changed
  (:class:`TreeBudgetChanged`).

The store keeps each as its JSON (``JOB_EVENT_DATA.dump_json``) and reads it back through
:data:`JOB_EVENT_DATA`; the wire carries one typed protobuf message per kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, field_validator

from airlock.behaviour import ApprovalDecision
from airlock.behaviour.approval import OnTimeout, Outcome, Strategy
from airlock.sandbox import SandboxEvent
from airlock.turn import PendingCall, SessionState
from airlock.weave import FixedPointExit
from layer0 import LogLevel, Money, TurnInput, TurnOutput

from ._effects import EffectOutcome
from ._errors import JobErrorKind, error_kind, is_retryable, kind_of
from ._states import ACTIVE_STATES, TERMINAL_STATES, JobState

__all__ = [
    "ACTIVE_STATES",
    "JOB_EVENT_DATA",
    "TERMINAL_STATES",
    "ApprovalChanged",
    "ApprovalWait",
    "ChildJobChanged",
    "EffectApplied",
    "EventKind",
    "FixedPointRun",
    "Job",
    "JobError",
    "JobEvent",
    "JobEventData",
    "JobFilter",
    "JobOrigin",
    "JobResumed",
    "JobState",
    "LogLine",
    "ResumeCause",
    "SandboxActivity",
    "SignalRecorded",
    "StateChanged",
    "StoredFile",
    "TreeBudgetChanged",
    "TreeBudgetUse",
    "TreeDecision",
    "utcnow",
]

#: Why a job continued in a fresh sandbox.
ResumeCause = Literal["restart", "lost", "approval"]

#: How a job came to be.
JobOrigin = Literal["submit", "delegate", "handoff"]

#: Kinds of job events (the ``kind`` tag of :data:`JobEventData`).
EventKind = Literal[
    "state", "sandbox", "effect", "child", "signal", "log", "approval", "resume", "workspace", "tree_budget"
]


def utcnow() -> datetime:
    """The current time, UTC, to the microsecond."""
    return datetime.now(UTC)


class StoredFile(BaseModel):
    """One of a job's files as the controller keeps it: an input file or an artifact."""

    model_config = ConfigDict(frozen=True)

    #: Relative to the sandbox's workspace.
    path: str
    size: int
    #: Hex SHA-256 of the content.
    sha256: str


class JobError(BaseModel):
    """Why a job ended without an output: its kind (a closed set, see :mod:`._job_errors`), the
    message, and whether submitting the job again unchanged may succeed."""

    model_config = ConfigDict(frozen=True)

    kind: JobErrorKind
    message: str
    retryable: bool = False

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: object) -> JobErrorKind:
        return error_kind(value)

    @classmethod
    def of(cls, kind: JobErrorKind | str, message: str) -> JobError:
        """An error of ``kind``, retryable as its kind is (see :data:`RETRYABLE_KINDS`)."""
        found = error_kind(kind)
        return cls(kind=found, message=message, retryable=is_retryable(found))

    @classmethod
    def raised(cls, error: BaseException) -> JobError:
        """The error a job failed with, as recorded (``turn_error``: retryable as its cause)."""
        kind = kind_of(error)
        return cls(kind=kind, message=str(error) or type(error).__name__, retryable=is_retryable(kind, error))


class ApprovalWait(BaseModel):
    """Tool calls a job waits on a person for, and the decisions so far."""

    model_config = ConfigDict(frozen=True)

    calls: list[PendingCall]
    #: The model call whose tool calls wait (1-based).
    iteration: int
    requested_at: datetime
    #: When the policy's timeout decides.
    deadline: datetime
    approvers: list[str] = Field(default_factory=list)
    strategy: Strategy = "any"
    on_timeout: OnTimeout = "reject"
    decisions: list[ApprovalDecision] = Field(default_factory=list)
    #: ``approved`` / ``rejected`` once decided (the job then resumes).
    outcome: Outcome | None = None


class FixedPointRun(BaseModel):
    """A job run ``until_stable``: its settings, each iteration's state hashes, and why it
    stopped (``exit``: ``stable``, ``cycle`` or ``max_iterations``)."""

    model_config = ConfigDict(frozen=True)

    max_iterations: int = Field(default=10, ge=1, le=1000)
    window: int = Field(default=3, ge=2, le=1000)
    #: ``[state_hash_pre, state_hash_post]`` of each iteration so far.
    hashes: list[tuple[str, str]] = Field(default_factory=list)
    #: Each iteration's output so far.
    outputs: list[TurnOutput] = Field(default_factory=list)
    exit: FixedPointExit | None = None
    #: The 0-based iteration whose output is the job's output.
    chosen: int | None = None


#: A tree budget's decision (layer0's ``BudgetDecision`` variants).
TreeDecision = Literal["continue", "downgrade_model", "halt_workflow", "request_increase"]


class TreeBudgetUse(BaseModel):
    """What the tree a job roots spent against its ``tree_budget`` now, and its decision."""

    model_config = ConfigDict(frozen=True)

    decision: TreeDecision
    spent: Money
    tokens: int = 0
    elapsed_ms: int = 0
    max_cost: Money | None = None
    max_tokens: int | None = None
    max_duration_ms: int | None = None
    model: str | None = None


class Job(BaseModel):
    """One job: an agent, its input, and what became of it."""

    model_config = ConfigDict(frozen=True)

    id: str
    agent: str
    state: JobState
    input: TurnInput
    output: TurnOutput | None = None
    error: JobError | None = None
    #: The fair-queue key (default: the agent's name).
    queue: str
    parent_id: str | None = None
    origin: JobOrigin = "submit"
    #: Signals from this job's turn are recorded under this workflow (default: the job id).
    workflow: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    #: Limit on the job's whole life, milliseconds.
    max_duration_ms: int | None = None
    #: Ids of the jobs this job's effects started, in order.
    children: list[str] = Field(default_factory=list)
    #: The effect executor's report (``EffectReport`` as JSON), once effects were applied.
    effects: JsonValue = None
    #: How often the job continued in a fresh sandbox from its last checkpoint.
    resumes: int = 0
    #: The calls it waits (or waited) on a person for.
    approval: ApprovalWait | None = None
    #: Set for a job run until its output is stable.
    fixed_point: FixedPointRun | None = None
    #: The tenant it belongs to (its submitter's; a child's is its parent's).
    tenant: str = "default"
    #: The principal that submitted it (a child: its root's submitter; None before principals).
    owner: str | None = None
    #: The job it was forked from (its conversation and workspace at ``fork_point``).
    forked_from: str | None = None
    #: Where in ``forked_from``'s history it started (``checkpoint 7 (record job:12)``).
    fork_point: str | None = None
    #: The long-lived sandbox it runs in (None: a sandbox of its own).
    sandbox: str | None = None
    #: The spend of the tree it roots against its agent's ``tree_budget`` (a root with one,
    #: as the controller reports it; not stored).
    tree_budget: TreeBudgetUse | None = None

    @property
    def session(self) -> str | None:
        """The input's session id, if any."""
        return str(self.input.session) if self.input.session is not None else None


class _EventData(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StateChanged(_EventData):
    """The job entered ``state`` (from ``previous``; None for its first event, and for
    events recorded before previous states were kept)."""

    kind: Literal["state"] = "state"
    state: JobState
    previous: JobState | None = None
    #: Why, in words (``exit reason complete``, ``cancelled: …``).
    detail: str | None = None
    #: Set when the job ended without an output.
    error: JobError | None = None


class SandboxActivity(_EventData):
    """Something the job's sandbox reported while its turn ran: a turn event (model and tool
    calls) or a proxy event (egress decisions, credential-proxy requests)."""

    kind: Literal["sandbox"] = "sandbox"
    event: SandboxEvent


class EffectApplied(_EventData):
    """What became of one effect the job's turn (or a child's turn) declared.

    ``outcome`` never holds ``child_output`` or ``follow_up``: a child's output and the
    report of its own effects are on the child's job (they are dropped here).
    """

    kind: Literal["effect"] = "effect"
    outcome: EffectOutcome
    #: 0 for the submitted job's own effects; n for a child n dispatches down.
    depth: int = 0
    #: The agent that declared the effect.
    source: str
    #: The job that declared it, when this event is a copy on an ancestor's record.
    job: str | None = None

    @field_validator("outcome")
    @classmethod
    def _without_child_reports(cls, outcome: EffectOutcome) -> EffectOutcome:
        if outcome.child_output is None and outcome.follow_up is None:
            return outcome
        return outcome.model_copy(update={"child_output": None, "follow_up": None})


class ChildJobChanged(_EventData):
    """A delegate or handoff child of the job started, or finished in ``state``."""

    kind: Literal["child"] = "child"
    phase: Literal["started", "finished"]
    #: The child job's id.
    job: str
    agent: str
    origin: JobOrigin
    #: The child's final state (``finished`` only).
    state: JobState | None = None


class SignalRecorded(_EventData):
    """A signal sent by this job's turn (``from_job`` None), or to its workflow by
    ``from_job``; ``count`` is how many that workflow has received."""

    kind: Literal["signal"] = "signal"
    #: The workflow the signal went to.
    target: str
    signal_type: str
    data: JsonValue = None
    count: int
    from_job: str | None = None


class LogLine(_EventData):
    """A log line: from the controller, the turn (``source="turn"``), or a Log effect
    (``source``: the declaring agent, ``data``: the effect's data)."""

    kind: Literal["log"] = "log"
    level: LogLevel
    message: str
    source: str
    data: JsonValue = None
    #: The job that declared the Log effect, when this event is a copy on an ancestor's record.
    job: str | None = None


class ApprovalChanged(_EventData):
    """``requested``: tool calls began to wait for a person (``calls``); ``decided``: one
    approver decided (``decision``); ``resolved``: the policy's outcome (``outcome``), the job
    resumes."""

    kind: Literal["approval"] = "approval"
    phase: Literal["requested", "decided", "resolved"]
    calls: list[PendingCall] = Field(default_factory=list)
    decision: ApprovalDecision | None = None
    outcome: Outcome | None = None


class JobResumed(_EventData):
    """The job continues in a fresh sandbox from its last checkpoint (``resume``-th time)."""

    kind: Literal["resume"] = "resume"
    resume: int
    #: ``restart``: the controller restarted; ``lost``: the sandbox was lost; ``approval``:
    #: the calls it waited for were decided. Only the first two count towards max_resumes.
    cause: ResumeCause
    #: Why, in words.
    reason: str
    #: Model calls already made (not made again).
    iteration: int
    #: Tool calls that were running when the sandbox was lost, and what became of them.
    lost_calls: list[str] = Field(default_factory=list)


class WorkspaceChanged(_EventData):
    """The job's workspace: ``saved`` (a snapshot was verified and kept), ``restored`` (an
    execution started from one), ``stopped`` (snapshots stopped, e.g. past ``max_bytes``;
    a resume restores the last one, older than the conversation)."""

    kind: Literal["workspace"] = "workspace"
    phase: Literal["saved", "restored", "stopped"]
    #: The manifest's digest (``sha256:…``; after ``stopped``: the last one kept, or "").
    manifest: str = ""
    files: int = 0
    bytes: int = 0
    #: The job's limit (``stopped``).
    max_bytes: int = 0
    #: Why snapshots stopped (``stopped``).
    reason: str | None = None


class TreeBudgetChanged(_EventData):
    """The budget decision of the tree this job roots: what the tree spent against its limits,
    the decision (``downgrade_model`` names the cheaper ``model``) and why."""

    kind: Literal["tree_budget"] = "tree_budget"
    decision: TreeDecision
    #: USD the tree's jobs spent (finished ones' outputs and running ones' live totals).
    spent: Money
    #: Tokens (in + out) they used.
    tokens: int = 0
    #: Wall time since the root started, milliseconds.
    elapsed_ms: int = 0
    #: The limits (None: unlimited); ``max_cost`` includes granted increases.
    max_cost: Money | None = None
    max_tokens: int | None = None
    max_duration_ms: int | None = None
    #: The model the tree's later calls use (``downgrade_model``).
    model: str | None = None
    reason: str = ""


#: What a job event says, tagged by ``kind`` (see the module's docstring).
JobEventData = Annotated[
    StateChanged
    | SandboxActivity
    | EffectApplied
    | ChildJobChanged
    | SignalRecorded
    | LogLine
    | ApprovalChanged
    | JobResumed
    | WorkspaceChanged
    | TreeBudgetChanged,
    Field(discriminator="kind"),
]

#: Validates and serialises :data:`JobEventData` (the store's canonical JSON).
JOB_EVENT_DATA: TypeAdapter[JobEventData] = TypeAdapter(JobEventData)


class JobEvent(BaseModel):
    """One thing that happened to a job; ``seq`` counts from 1 per job."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    seq: int
    time: datetime
    data: JobEventData

    @property
    def kind(self) -> EventKind:
        """The event's kind (its ``data``'s tag)."""
        return self.data.kind

    @property
    def terminal(self) -> bool:
        """Whether this event made its job terminal (a ``state`` event to a terminal state)."""
        return isinstance(self.data, StateChanged) and self.data.state.terminal


class JobFilter(BaseModel):
    """Which jobs ``list`` returns (all given conditions hold), most recent first."""

    model_config = ConfigDict(frozen=True)

    states: frozenset[JobState] = frozenset()
    agent: str | None = None
    session: str | None = None
    parent_id: str | None = None
    workflow: str | None = None
    #: Only this tenant's jobs, and only this principal's (None: any).
    tenant: str | None = None
    owner: str | None = None
    limit: int = 50
    #: Only jobs created before this job (paging).
    before_id: str | None = None


@dataclass(frozen=True)
class Inspection:
    """A job's session as of its latest checkpoint (``state``: None before the first)."""

    job: Job
    state: SessionState | None
    running: bool
    paused: bool
    pending: list[PendingCall]

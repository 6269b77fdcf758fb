"""The job record, its states and its events (pydantic; the store and the wire map to these)."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from layer0 import TurnInput, TurnOutput


class JobState(StrEnum):
    """Where a job is in its life (see ``protos/airlock/controller/v1/controller.proto``)."""

    QUEUED = "queued"
    PROVISIONING = "provisioning"
    RUNNING = "running"
    APPLYING_EFFECTS = "applying_effects"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        """Whether the job will not change any more."""
        return self in TERMINAL_STATES

    @property
    def active(self) -> bool:
        """Whether a worker holds the job (a sandbox may exist)."""
        return self in ACTIVE_STATES


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.INTERRUPTED}
)
ACTIVE_STATES = frozenset({JobState.PROVISIONING, JobState.RUNNING, JobState.APPLYING_EFFECTS})

#: How a job came to be.
JobOrigin = Literal["submit", "delegate", "handoff"]

#: Kinds of job events (``JobEvent.kind``).
EventKind = Literal["state", "turn", "egress", "credential_proxy", "effect", "child", "signal", "log"]


def utcnow() -> datetime:
    """The current time, UTC, to the microsecond."""
    return datetime.now(UTC)


class JobError(BaseModel):
    """Why a job ended without an output."""

    model_config = ConfigDict(frozen=True)

    #: A layer0 EnvError/TurnError kind, or ``controller`` / ``cancelled`` / ``timeout`` /
    #: ``interrupted``.
    kind: str
    message: str


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

    @property
    def session(self) -> str | None:
        """The input's session id, if any."""
        return str(self.input.session) if self.input.session is not None else None


class JobEvent(BaseModel):
    """One thing that happened to a job; ``seq`` counts from 1 per job."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    seq: int
    time: datetime
    kind: str
    data: JsonValue = None

    @property
    def terminal(self) -> bool:
        """Whether this event made its job terminal (a ``state`` event to a terminal state)."""
        if self.kind != "state" or not isinstance(self.data, dict):
            return False
        state = self.data.get("state")
        return isinstance(state, str) and state in {s.value for s in TERMINAL_STATES}


class JobFilter(BaseModel):
    """Which jobs ``list`` returns (all given conditions hold), most recent first."""

    model_config = ConfigDict(frozen=True)

    states: frozenset[JobState] = frozenset()
    agent: str | None = None
    session: str | None = None
    parent_id: str | None = None
    workflow: str | None = None
    limit: int = 50
    #: Only jobs created before this job (paging).
    before_id: str | None = None

"""JobState: where a controller job is in its life.

A module of its own, importing nothing but the standard library, so that ``airlock.cli`` can
offer the states as ``--state`` choices without importing the controller (gRPC, SQLite).
``airlock.controller`` re-exports it.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """Where a job is in its life (see ``protos/airlock/controller/v1/controller.proto``)."""

    QUEUED = "queued"
    PROVISIONING = "provisioning"
    RUNNING = "running"
    #: Stopped before tool calls that wait for a person; holds no sandbox and no worker.
    AWAITING_APPROVAL = "awaiting_approval"
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

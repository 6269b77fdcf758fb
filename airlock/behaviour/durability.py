"""What becomes of a job whose sandbox or controller was lost mid-turn.

The controller resumes such a job in a fresh sandbox from its last checkpoint: the
conversation, the model responses and the tool results already recorded are replayed, never
re-run. A tool call that was running when the sandbox was lost is the one open question: it
may or may not have taken effect. ``in_flight`` says what to do with it: ``rerun`` it (for
idempotent tools), or ``fail`` it (the model reads that it was lost, and decides).
``max_resumes`` stops crash loops. ``workspace`` keeps the files: the runner snapshots
``/workspace`` before each checkpoint whose files changed, so a resumed (or forked) job gets
them back as they were at the checkpoint it continues from.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The result the model reads for a call lost with its sandbox (``in_flight: fail``).
LOST_CALL = (
    "lost: the sandbox was lost while this call ran, so it may or may not have taken effect; "
    "check before repeating it"
)


class WorkspacePolicy(BaseModel):
    """How a job's workspace is kept between sandboxes (``durability.workspace``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Snapshot the workspace with the checkpoints (off: a resumed job starts with its input
    #: files only).
    snapshots: bool = True
    #: The largest workspace (bytes, uncompressed) snapshotted: past it the job runs on, its
    #: snapshots stop (an event and a warning say so) and a resume restores the last one.
    max_bytes: int = Field(default=256 * 2**20, ge=0, le=2**40)


class DurabilityPolicy(BaseModel):
    """An agent's durability policy (the ``durability:`` section of its configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: A tool call running when the sandbox was lost: run it again, or report it failed.
    in_flight: Literal["rerun", "fail"] = "fail"
    #: Resumes allowed per job (0: a lost job fails at once).
    max_resumes: int = Field(default=3, ge=0, le=1000)
    #: The workspace's snapshots.
    workspace: WorkspacePolicy = Field(default_factory=WorkspacePolicy)

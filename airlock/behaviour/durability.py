"""What becomes of a job whose sandbox or controller was lost mid-turn.

The controller resumes such a job in a fresh sandbox from its last checkpoint: the
conversation, the model responses and the tool results already recorded are replayed, never
re-run. A tool call that was running when the sandbox was lost is the one open question: it
may or may not have taken effect. ``in_flight`` says what to do with it: ``rerun`` it (for
idempotent tools), or ``fail`` it (the model reads that it was lost, and decides).
``max_resumes`` stops crash loops.

``workspace`` covers the files: with ``snapshots`` on (the default), /workspace is
snapshotted (incrementally, content-addressed, compressed) at each checkpoint, so a resumed
job finds its files as they were, and a fork starts from them. Past ``max_bytes`` (the
workspace's total size, uncompressed; a quantity such as ``256Mi``) the job runs on and
snapshots stop, with a warning: a resume then restores the last snapshot taken.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from airlock.policy.resources import parse_bytes

#: The result the model reads for a call lost with its sandbox (``in_flight: fail``).
LOST_CALL = (
    "lost: the sandbox was lost while this call ran, so it may or may not have taken effect; "
    "check before repeating it"
)


#: The default cap of a job's workspace snapshots (256 MiB).
DEFAULT_WORKSPACE_BYTES = 256 * 2**20


class WorkspacePolicy(BaseModel):
    """Snapshots of a job's /workspace (``durability.workspace``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Snapshot the workspace at each checkpoint (off: a resume starts with an empty one).
    snapshots: bool = True
    #: The workspace size (uncompressed) past which snapshots stop; bytes or a quantity.
    max_bytes: int = Field(default=DEFAULT_WORKSPACE_BYTES, gt=0)

    @field_validator("max_bytes", mode="before")
    @classmethod
    def _quantity(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_bytes(value, field="durability.workspace.max_bytes")
        return value


class DurabilityPolicy(BaseModel):
    """An agent's durability policy (the ``durability:`` section of its configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: A tool call running when the sandbox was lost: run it again, or report it failed.
    in_flight: Literal["rerun", "fail"] = "fail"
    #: Resumes allowed per job (0: a lost job fails at once).
    max_resumes: int = Field(default=3, ge=0, le=1000)
    #: Snapshots of the job's /workspace (resume with files, fork).
    workspace: WorkspacePolicy = Field(default_factory=WorkspacePolicy)

"""Where a fork starts: a checkpoint of a job's history, found by its number or by a record
of the job's thread, and the session state and workspace at it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import ValidationError

from airlock.errors import AirlockError
from airlock.turn import Checkpoint, ProviderMessage, Role, SessionState, TextPart

__all__ = ["CheckpointEntry", "ForkPoint", "ForkRefused", "ForkSeed", "continued", "fork_point"]


class ForkRefused(AirlockError):
    """A fork that cannot start where it was asked to; says why."""


class CheckpointEntry(Protocol):
    """One checkpoint of a job's history as the store keeps it."""

    @property
    def seq(self) -> int: ...
    @property
    def delta(self) -> str: ...
    @property
    def manifest(self) -> str | None: ...
    @property
    def record(self) -> str | None: ...


@dataclass(frozen=True)
class ForkSeed:
    """What a fork's job is created with: where it came from (``point``: ``seq[@record]``),
    the checkpoint it starts from (a full ``SessionState`` as JSON) and the workspace
    manifest that checkpoint names (None: none)."""

    forked_from: str
    point: str
    state: str
    manifest: str | None


@dataclass(frozen=True)
class ForkPoint:
    """The checkpoint ``seq`` of a job: its full session state, the workspace manifest it
    names (None: no snapshot), and the job's latest record then (None: none yet)."""

    seq: int
    state: SessionState
    manifest: str | None
    record: str | None

    @property
    def label(self) -> str:
        """How the fork names where it started (``checkpoint 7 (record job:12)``)."""
        at = f" (record {self.record})" if self.record else ""
        return f"checkpoint {self.seq}{at}"


def fork_point(entries: Sequence[CheckpointEntry], at: str | None, job_id: str) -> ForkPoint:
    """The fork point ``at`` (a checkpoint number, or a record ``JOB:n`` of the job's thread:
    the first checkpoint at or after it; None: the last checkpoint) of the job's history
    ``entries`` (in order), its state rebuilt from the checkpoints up to it.

    Raises:
        ForkRefused: no checkpoint, an unknown number, a record of another job or past the
            last checkpoint, or a history that does not rebuild.
    """
    if not entries:
        raise ForkRefused(f"job {job_id} has no checkpoint to fork from (its turn never started)")
    chosen = _chosen(entries, at, job_id)
    state: SessionState | None = None
    for entry in entries:
        try:
            state = SessionState.from_checkpoint(Checkpoint.model_validate_json(entry.delta), state)
        except (ValueError, ValidationError) as e:
            raise ForkRefused(f"checkpoint {entry.seq} of job {job_id} does not rebuild: {e}") from e
        if entry.seq == chosen.seq:
            return ForkPoint(chosen.seq, state, chosen.manifest, chosen.record)
    raise AssertionError("unreachable: the chosen checkpoint is one of the entries")


def _chosen(entries: Sequence[CheckpointEntry], at: str | None, job_id: str) -> CheckpointEntry:
    if at is None or not at.strip():
        return entries[-1]
    at = at.strip()
    if at.isdigit():
        for entry in entries:
            if entry.seq == int(at):
                return entry
        raise ForkRefused(
            f"job {job_id} has no checkpoint {at} (its checkpoints are 1 to {entries[-1].seq}; "
            "`airlock jobs weave` shows its records)"
        )
    thread, _, n = at.rpartition(":")
    if thread != job_id or not n.isdigit():
        raise ForkRefused(f"{at!r} is neither a checkpoint number nor a record of job {job_id} (JOB:n)")
    for entry in entries:
        if entry.record is not None and _position(entry.record) >= int(n):
            return entry
    raise ForkRefused(f"no checkpoint of job {job_id} follows record {at}")


def _position(record: str) -> int:
    """``n`` of a record id ``job:n`` (-1 when it has none)."""
    n = record.rpartition(":")[2]
    return int(n) if n.isdigit() else -1


def continued(state: SessionState, message: str) -> SessionState:
    """``state`` continued with the user's ``message``: the conversation goes on from there
    as a new step (the turn's end, if it had ended, undone).

    Raises:
        ForkRefused: the state is inside a step (tool calls asked and not answered).
    """
    if state.open_uses():
        raise ForkRefused(
            "that checkpoint is inside a step (the model's tool calls are not all answered); "
            "fork with a message at a step boundary, or without a message"
        )
    messages = list(state.messages)
    text = TextPart(text=message)
    if messages and messages[-1].role is Role.USER:
        last = messages[-1]
        messages[-1] = last.model_copy(update={"content": [*last.content, text]})
    else:
        messages.append(ProviderMessage(role=Role.USER, content=[text]))
    return state.model_copy(
        update={"messages": messages, "exit_reason": None, "last_stop": None, "completed": [], "approved": []}
    )

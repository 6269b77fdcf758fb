"""Resuming a job: the checkpoint a fresh sandbox continues from, and which failures allow it."""

from __future__ import annotations

from airlock.behaviour import LOST_CALL, DurabilityPolicy
from airlock.turn import SessionState, ToolExecution, ToolUsePart
from layer0 import EnvError, TurnError, TurnInput

#: Sandbox failures a resume cannot mend (the same request would fail the same way).
_NOT_RESUMABLE = frozenset({"isolation_violation", "credential_failed", "provision_failed"})


def lost_sandbox(error: BaseException) -> bool:
    """Whether ``error`` says the sandbox was lost mid-turn (it died, was removed, ran out of
    memory, or its runner's channel dropped), not that the turn itself failed."""
    if not isinstance(error, EnvError) or error.kind in _NOT_RESUMABLE:
        return False
    if error.kind == "turn_error":
        cause = error.__cause__
        return isinstance(cause, TurnError) and cause.kind == "retryable"
    return True


def in_flight(state: SessionState, started: list[str]) -> list[ToolUsePart]:
    """The open step's calls that started but did not finish: running when the sandbox was lost."""
    done = {c.tool_use_id for c in state.completed}
    return [u for u in state.open_uses() if u.id in started and u.id not in done]


def resume_state(
    saved: str, started: list[str], input: TurnInput, policy: DurabilityPolicy
) -> tuple[SessionState, list[str]]:
    """The state to resume from: the saved checkpoint, the job's own input (never the
    sandbox's), and each call that was running when the sandbox was lost either left to run
    again (``rerun``) or answered as lost (``fail``). Returns the state and the lost calls."""
    state = SessionState.model_validate_json(saved).model_copy(update={"input": input})
    lost = in_flight(state, started)
    if lost and policy.in_flight == "fail":
        answered = [
            ToolExecution(tool_use_id=u.id, name=u.name, input=u.input, output=LOST_CALL, is_error=True)
            for u in lost
        ]
        state = state.model_copy(update={"completed": [*state.completed, *answered]})
    return state, [u.id for u in lost]

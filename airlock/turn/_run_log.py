"""Log effects a turn declares while it runs (a tool's failure, a compaction, a provider's
retries), and the budget bookkeeping its lifecycle events follow.

The log lines are capped at :data:`MAX_RUN_LOGS` per turn, each message at
:data:`RUN_LOG_CHARS`: the caller refuses every effect of an output holding more than its
``max_effects`` (64 by default), so a turn full of failing tool calls must not crowd out its
memory writes and history. The lines left out are counted, and one last line says how many.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from pydantic import JsonValue

from airlock.errors import shorten
from airlock.spec import named_workflow
from layer0 import Log, LogLevel, TurnInput, WorkflowId

from ._state import SessionState

#: Log effects one turn declares while it runs, at most (a last line counts the rest).
MAX_RUN_LOGS = 16
#: Characters of one log line's message, at most.
RUN_LOG_CHARS = 500


def note(state: SessionState, level: LogLevel, message: str, data: JsonValue = None) -> None:
    """Declare a log effect in ``state`` (or count it as left out past :data:`MAX_RUN_LOGS`)."""
    if state.run_logs >= MAX_RUN_LOGS:
        state.run_logs_dropped += 1
        return
    state.run_logs += 1
    state.effects.append(Log(level=level, message=shorten(message, RUN_LOG_CHARS), data=data))


def dropped_line(state: SessionState) -> Log | None:
    """The line saying how many log lines were left out, if any were."""
    if not state.run_logs_dropped:
        return None
    return Log(
        level=LogLevel.WARN,
        message=f"{state.run_logs_dropped} more log line(s) of this turn were not declared "
        f"(at most {MAX_RUN_LOGS} per turn)",
        data={"dropped": state.run_logs_dropped},
    )


def workflow_of(input: TurnInput, agent: str) -> WorkflowId:
    """The workflow a turn's budget events name: ``metadata.workflow`` when it is a string,
    else the session id, else the agent's name."""
    named = named_workflow(input.metadata)
    if named is not None:
        return WorkflowId(named)
    return WorkflowId(str(input.session) if input.session is not None else agent)


def due_warnings(
    cost: Decimal, max_cost: Decimal | None, fractions: Sequence[float], warned: Sequence[float]
) -> list[float]:
    """The fractions of ``max_cost`` that ``cost`` has reached and no warning was emitted for."""
    if max_cost is None or max_cost <= 0:
        return []
    return [f for f in fractions if f not in warned and cost >= max_cost * Decimal(str(f))]

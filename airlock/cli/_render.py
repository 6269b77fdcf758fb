"""Short, escaped text for the governance values the job verbs print: tool calls waiting for
approval, approvers' decisions, a job's approval wait and fixed-point run, session messages,
a turn's lifecycle events (budget, compaction)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.markup import escape

from airlock.behaviour import ApprovalDecision
from airlock.jobs import ApprovalWait, FixedPointRun
from airlock.turn import (
    CompactionPart,
    ImagePart,
    LifecycleEvent,
    PendingCall,
    ProviderMessage,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from layer0 import (
    BudgetAction,
    BudgetWarning,
    CompactionComplete,
    ContextPressure,
    CostIncurred,
    PreCompactionFlush,
    ProviderManaged,
)

#: Characters of a value shown on one line.
PREVIEW = 160


def shorten(text: str, limit: int = PREVIEW) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``limit`` characters with ``…``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def preview(value: Any, limit: int = PREVIEW) -> str:
    """A JSON value (or text) on one short line (not escaped)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return shorten(text, limit)


def clock(value: datetime) -> str:
    """A time in the local zone, to the second."""
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def call_line(call: PendingCall, agent: str | None = None) -> str:
    """``bash {"command": …} destructive (agent ops)``: a call waiting for approval (markup)."""
    risks = f" [red]{escape(', '.join(call.risks))}[/]" if call.risks else ""
    by = f" [dim](agent {escape(agent)})[/]" if agent else ""
    return f"{escape(call.name)} [dim]{escape(preview(call.input))}[/]{risks}{by}"


def decision_text(decision: ApprovalDecision) -> str:
    """``ana approved: fine`` / ``bob rejected: too risky`` (``(automatic)`` when the policy
    decided), as markup."""
    verdict = "[green]approved[/]" if decision.approve else "[red]rejected[/]"
    auto = " [dim](automatic)[/]" if decision.automatic else ""
    comment = f": {escape(shorten(decision.comment))}" if decision.comment else ""
    return f"{escape(decision.approver)} {verdict}{auto}{comment}"


def approval_rows(wait: ApprovalWait, agent: str) -> list[tuple[str, str]]:
    """The rows ``jobs show`` prints for a job's approval wait (markup)."""
    rows = [
        (
            "waiting for" if wait.outcome is None else "approval of",
            "\n".join(call_line(c, agent) for c in wait.calls),
        ),
        (
            "approvers",
            f"{escape(', '.join(wait.approvers) or 'none')} [dim](strategy {escape(wait.strategy)}; "
            f"on timeout: {escape(wait.on_timeout)})[/]",
        ),
        ("requested", clock(wait.requested_at)),
        ("deadline", clock(wait.deadline)),
        (
            "decisions",
            "\n".join(f"{clock(d.time)} {decision_text(d)}" for d in wait.decisions) or "[dim]none yet[/]",
        ),
    ]
    if wait.outcome is not None:
        colour = "green" if wait.outcome == "approved" else "red"
        rows.append(("outcome", f"[{colour}]{wait.outcome}[/]"))
    return rows


def fixed_point_text(run: FixedPointRun) -> str:
    """``3 of at most 10 iterations (window 3); exit stable, output of iteration 2`` (1-based)."""
    done = f"{len(run.hashes)} of at most {run.max_iterations} iterations (window {run.window})"
    if run.exit is None:
        return f"{done}; running"
    chosen = f", output of iteration {run.chosen + 1}" if run.chosen is not None else ""
    return f"{done}; exit {run.exit}{chosen}"


def message_text(message: ProviderMessage, limit: int = PREVIEW) -> str:
    """A session message's parts on one short line (not escaped): text, ``→ tool(input)`` for
    a call, ``← output`` for a result, ``[image]``."""
    parts: list[str] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append(part.text)
        elif isinstance(part, ToolUsePart):
            parts.append(f"→ {part.name}({preview(part.input, limit)})")
        elif isinstance(part, ToolResultPart):
            parts.append(f"← {'error: ' if part.is_error else ''}{part.content}")
        elif isinstance(part, ImagePart):
            parts.append("[image]")
        elif isinstance(part, CompactionPart):
            parts.append(f"[compacted: {part.summary or 'no summary'}]")
    return shorten(" ".join(parts), limit)


def lifecycle_line(event: LifecycleEvent) -> str | None:
    """A lifecycle event as one progress line (markup); None for those not worth a line of
    their own (the cost of each call, already on its model line; the flush before a compaction)."""
    e = event.event
    if isinstance(e, BudgetWarning):
        share = f" ({100 * e.spent / e.limit:.0f}%)" if e.limit else ""
        return f"[yellow]budget warning[/]: ${e.spent} of ${e.limit} spent{share}"
    if isinstance(e, BudgetAction):
        return f"[red]budget[/]: {escape(str(e.action))} (workflow {escape(str(e.workflow))})"
    if isinstance(e, ContextPressure):
        return f"[dim]context {e.fill_percent:.0f}% full ({e.tokens_used} of {e.tokens_available} tokens)[/]"
    if isinstance(e, CompactionComplete):
        return f"[dim]context compacted by {escape(e.strategy)}: about {e.tokens_freed} tokens freed[/]"
    if isinstance(e, ProviderManaged):
        return (
            f"[dim]context compacted by provider {escape(e.provider)}: about {e.tokens_before} → "
            f"{e.tokens_after} tokens[/]"
        )
    assert isinstance(e, CostIncurred | PreCompactionFlush)
    return None

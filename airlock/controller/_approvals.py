"""Approval waits: what a job waits for, and what a decided wait does to its checkpoint."""

from __future__ import annotations

from datetime import datetime, timedelta

from airlock.behaviour import ApprovalDecision, ApprovalPolicy
from airlock.behaviour.approval import Outcome
from airlock.jobs import ApprovalWait
from airlock.turn import PendingCall, SessionState, ToolExecution

#: Who decides when the policy itself does (no approver configured, a timeout).
POLICY = "policy"


def new_wait(
    policy: ApprovalPolicy | None, calls: list[PendingCall], iteration: int, now: datetime
) -> ApprovalWait:
    """The wait for ``calls`` under ``policy`` (None: an agent without one approves at once)."""
    timeout_ms = policy.timeout_ms if policy is not None else 0
    return ApprovalWait(
        calls=calls,
        iteration=iteration,
        requested_at=now,
        deadline=now + timedelta(milliseconds=timeout_ms),
        approvers=list(policy.approvers) if policy is not None else [],
        strategy=policy.strategy if policy is not None else "any",
        on_timeout=policy.on_timeout if policy is not None else "reject",
    )


def automatic(approve: bool, why: str, now: datetime) -> ApprovalDecision:
    """A decision the policy makes itself."""
    return ApprovalDecision(approver=POLICY, approve=approve, comment=why, time=now, automatic=True)


def outcome_of(policy: ApprovalPolicy | None, wait: ApprovalWait) -> Outcome | None:
    """``approved`` / ``rejected`` once the decisions settle the wait; None while open."""
    if policy is None:
        return "approved"
    return policy.outcome(wait.decisions)


def rejection_text(wait: ApprovalWait) -> str:
    """What the model reads for a rejected call: who rejected it and why."""
    against = [d for d in wait.decisions if not d.approve]
    names = ", ".join(dict.fromkeys(d.approver for d in against)) or POLICY
    reasons = "; ".join(d.comment for d in against if d.comment) or "no reason given"
    return f"rejected by {names}: {reasons}. The call did not run; do not retry it unchanged."


def apply_outcome(state: SessionState, wait: ApprovalWait) -> SessionState:
    """The checkpoint with the wait's calls decided: approved ones run on resume without
    waiting again; rejected ones are answered with the rejection (they never run)."""
    ids = [c.tool_use_id for c in wait.calls]
    if wait.outcome == "approved":
        return state.model_copy(update={"approved": [*state.approved, *ids]})
    text = rejection_text(wait)
    rejected = [
        ToolExecution(tool_use_id=c.tool_use_id, name=c.name, input=c.input, output=text, is_error=True)
        for c in wait.calls
    ]
    return state.model_copy(update={"completed": [*state.completed, *rejected]})

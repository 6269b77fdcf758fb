"""Who must approve an agent's gated tool calls, and how their decisions combine.

The gate (which calls wait) travels to the sandbox in the AgentSpec
(:class:`airlock.spec.ApprovalGate`); the rest stays on the controller: the approvers, the
strategy, the timeout and what a timeout decides. :meth:`ApprovalPolicy.outcome` is the pure
rule that turns the decisions recorded so far into approved, rejected or still waiting.

Strategies over ``n`` approvers: ``all`` needs every one, ``any`` needs one, ``majority``
needs more than half. A call is rejected as soon as the approvals still possible cannot reach
that number (so under ``all`` one rejection rejects; under ``any`` every approver must reject).
With no approvers the call is approved at once (the decision is still recorded).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from airlock.spec import ApprovalGate

Strategy = Literal["all", "any", "majority"]
#: What a timeout decides.
OnTimeout = Literal["approve", "reject"]
Outcome = Literal["approved", "rejected"]
_Name = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]


class ApprovalDecision(BaseModel):
    """One approver's decision on the calls a job waits for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approver: str
    approve: bool
    #: The approver's comment, or the reason of a rejection.
    comment: str = ""
    time: datetime
    #: Made by the policy itself: a timeout's default, or no approver configured.
    automatic: bool = False


class ApprovalPolicy(BaseModel):
    """An agent's approval policy (the ``approval:`` section of its configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Tool names or ``fnmatch`` globs whose calls wait for approval.
    tools: tuple[str, ...] = ()
    #: Risk classes whose tools' calls wait for approval (``destructive``, ``external``).
    risks: tuple[str, ...] = ()
    #: Who may decide; empty: calls are approved at once.
    approvers: tuple[_Name, ...] = ()
    strategy: Strategy = "any"
    #: How long a job waits for the decisions, milliseconds.
    timeout_ms: int = Field(default=3_600_000, gt=0)
    #: What a timeout decides.
    on_timeout: OnTimeout = "reject"

    def gate(self) -> ApprovalGate:
        """The part the sandbox enforces: which calls wait."""
        return ApprovalGate(tools=list(self.tools), risks=list(self.risks))

    @property
    def needed(self) -> int:
        """Approvals that approve a call under the strategy."""
        n = len(self.approvers)
        if n == 0:
            return 0
        return {"all": n, "any": 1, "majority": n // 2 + 1}[self.strategy]

    def approver_problem(self, name: str) -> str | None:
        """Why ``name`` may not decide (None when it may)."""
        if not self.approvers:
            return "this agent's calls need no approver: they were approved at once"
        if name not in self.approvers:
            return f"{name!r} is not an approver of this agent; its approvers: {', '.join(self.approvers)}"
        return None

    def outcome(self, decisions: Sequence[ApprovalDecision]) -> Outcome | None:
        """What the decisions so far decide (an approver's latest decision counts); None
        while the strategy can still go either way."""
        if any(d.automatic for d in decisions):
            return "approved" if decisions[-1].approve else "rejected"
        latest = {d.approver: d.approve for d in decisions if d.approver in self.approvers}
        approvals = sum(latest.values())
        undecided = len(self.approvers) - len(latest)
        if approvals >= self.needed:
            return "approved"
        if approvals + undecided < self.needed:
            return "rejected"
        return None

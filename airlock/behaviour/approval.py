"""Who must approve an agent's gated tool calls, and how their decisions combine.

The gate (which calls wait) travels to the sandbox in the AgentSpec
(:class:`airlock.spec.ApprovalGate`); the rest stays on the controller: the approvers, the
strategy, the timeout and what a timeout decides. :meth:`ApprovalPolicy.outcome` is the pure
rule that turns the decisions recorded so far into approved, rejected or still waiting.

Strategies over ``n`` approvers: ``any`` approves on the first approval and rejects on the
first rejection; ``all`` needs every approval and rejects on any rejection; ``majority`` needs
more than half and rejects once the approvals still possible cannot reach that. The first
decision that settles the wait settles it (later ones change nothing); before that an
approver's latest decision counts. With no approvers the call is approved at once (the
decision is still recorded).
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

    @property
    def rejections_needed(self) -> int:
        """Rejections that reject a call: one under ``any`` and ``all``; under ``majority``
        enough that the approvals still possible fall short."""
        if self.strategy == "majority":
            return len(self.approvers) - self.needed + 1
        return 1

    def approver_problem(self, name: str) -> str | None:
        """Why ``name`` may not decide (None when it may)."""
        if not self.approvers:
            return "this agent's calls need no approver: they were approved at once"
        if name not in self.approvers:
            return f"{name!r} is not an approver of this agent; its approvers: {', '.join(self.approvers)}"
        return None

    def outcome(self, decisions: Sequence[ApprovalDecision]) -> Outcome | None:
        """What the decisions so far decide, in order: the first that settles the wait under
        the strategy decides (an automatic one always does); None while it is still open."""
        latest: dict[str, bool] = {}
        for decision in decisions:
            if decision.automatic:
                return "approved" if decision.approve else "rejected"
            if decision.approver not in self.approvers:
                continue  # strangers count for nothing
            latest[decision.approver] = decision.approve
            settled = self._settled(latest)
            if settled is not None:
                return settled
        return None if self.approvers else "approved"

    def _settled(self, latest: dict[str, bool]) -> Outcome | None:
        approvals = sum(latest.values())
        if approvals >= self.needed:
            return "approved"
        if len(latest) - approvals >= self.rejections_needed:
            return "rejected"
        return None

"""The approval gate of a turn in progress: which tool calls wait for a person's decision,
and the calls the session is suspended before."""

from __future__ import annotations

from ._events import PendingCall
from ._step_context import StepContext
from ._types import ToolUsePart


class Approvals:
    """The tool calls of the open step that wait for approval (per the turn's ApprovalGate)."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        #: The calls the session is suspended before (resumed from a state with them decided).
        self.awaiting: list[PendingCall] = []

    def pending(self, uses: list[ToolUsePart]) -> list[PendingCall]:
        """The open step's calls that wait for approval (none ran, none was approved)."""
        ctx = self._ctx
        gate = ctx.turn.approval
        if gate is None:
            return []
        st = ctx.state
        settled = {ex.tool_use_id for ex in st.completed} | set(st.approved)
        registry = ctx.turn.tools
        pending = []
        for use in uses:
            if use.id in settled or use.name not in ctx.cfg.offered:
                continue
            risks = registry.risks(use.name)
            if gate.needs(use.name, risks):
                pending.append(
                    PendingCall(tool_use_id=use.id, name=use.name, input=use.input, risks=list(risks))
                )
        return pending

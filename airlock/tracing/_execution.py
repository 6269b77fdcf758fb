"""One execution of a job's turn as spans: its sandbox provision, its turn, each model call and
each tool call under the turn; egress and credential proxy decisions as span events.

The runner's events arrive live on the sandbox's event stream (their times are when the
controller received them; a call's span is made when it ends, from the time its start arrived).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from airlock.config import AgentConfig
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.sandbox import PoolStats, SandboxEvent
from airlock.turn import (
    InferenceFinished,
    InferenceStarted,
    SuspendedForApproval,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)

from ._attributes import (
    Value,
    credential_attributes,
    egress_attributes,
    model_call_attributes,
    provision_attributes,
    tool_call_attributes,
)

#: Each backend's warm pool statistics, now (the runner's ``pool_stats``).
PoolReader = Callable[[], Mapping[str, PoolStats]]
_Event = tuple[str, dict[str, Value], int]


@dataclass
class _Call:
    """A model or tool call whose start arrived (its end not yet) and the events meanwhile."""

    started: InferenceStarted | ToolStarted
    at: int
    events: list[_Event] = field(default_factory=list)


class Execution:
    """The spans of one execution, under ``parent`` (the job's span)."""

    def __init__(self, tracer: Tracer, parent: Span, agent: AgentConfig, pools: PoolReader) -> None:
        self._tracer = tracer
        self._context = trace.set_span_in_context(parent)
        self._agent = agent
        self._pools = pools
        self._before = self._pool_counts()
        self._provision: Span | None = tracer.start_span(
            "sandbox provision", self._context, attributes=provision_attributes(agent)
        )
        self._turn: Span | None = None
        self._models: dict[int, _Call] = {}
        self._tools: dict[str, _Call] = {}

    async def observe(self, event: SandboxEvent) -> None:
        """Record ``event`` (a sandbox event sink)."""
        now = time.time_ns()
        if isinstance(event, TurnStarted):
            self._started(event, now)
        elif isinstance(event, InferenceStarted):
            self._models[event.iteration] = _Call(event, now)
        elif isinstance(event, ToolStarted):
            self._tools[event.tool_use_id] = _Call(event, now)
        elif isinstance(event, InferenceFinished):
            self._model_ended(self._models.pop(event.iteration, None), event, now)
        elif isinstance(event, ToolFinished):
            self._tool_ended(self._tools.pop(event.tool_use_id, None), event, now)
        elif isinstance(event, EgressEvent):
            self._event(f"egress.{event.phase}", egress_attributes(event), now)
        elif isinstance(event, CredentialProxyEvent):
            self._event("credential_proxy", credential_attributes(event), now)

    def end(self, error: BaseException | None) -> None:
        """The execution ended (``error``: how it failed; a suspension for approval is none);
        what is still open ends now."""
        now = time.time_ns()
        if isinstance(error, SuspendedForApproval):
            if self._turn is not None:
                self._turn.set_attribute("airlock.turn.suspended_for_approval", len(error.calls))
            error = None
        for model in list(self._models.values()):
            self._model_ended(model, None, now)
        for tool in list(self._tools.values()):
            self._tool_ended(tool, None, now)
        self._models.clear()
        self._tools.clear()
        for span in (self._provision, self._turn):
            if span is not None:
                if error is not None:
                    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                span.end(now)
        self._provision = self._turn = None

    def _started(self, event: TurnStarted, now: int) -> None:
        if self._provision is not None:
            self._provision.set_attribute("airlock.sandbox.pool", self._warmth())
            self._provision.end(now)
            self._provision = None
        if self._turn is None:
            attributes = {"airlock.turn.resumed": event.resumed}
            self._turn = self._tracer.start_span("turn", self._context, attributes=attributes, start_time=now)

    def _model_ended(self, call: _Call | None, event: InferenceFinished | None, now: int) -> None:
        if call is None or not isinstance(call.started, InferenceStarted):
            return
        attributes = model_call_attributes(self._agent, call.started, event)
        name = f"chat {attributes['gen_ai.request.model']}"
        self._child(name, call, attributes, now, None if event is not None else "unfinished")

    def _tool_ended(self, call: _Call | None, event: ToolFinished | None, now: int) -> None:
        if call is None or not isinstance(call.started, ToolStarted):
            return
        attributes = tool_call_attributes(call.started, event)
        error = "unfinished" if event is None else None if event.success else "the tool returned an error"
        self._child(f"execute_tool {call.started.name}", call, attributes, now, error)

    def _child(
        self, name: str, call: _Call, attributes: dict[str, Value], now: int, error: str | None
    ) -> None:
        """A call's span under the turn, from when its start arrived to ``now``."""
        parent = trace.set_span_in_context(self._turn) if self._turn is not None else self._context
        span = self._tracer.start_span(name, parent, attributes=attributes, start_time=call.at)
        for event_name, event_attributes, at in call.events:
            span.add_event(event_name, event_attributes, at)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(max(now, call.at))

    def _event(self, name: str, attributes: dict[str, Value], now: int) -> None:
        """A proxy decision: on the one tool call running, else the turn, else the provision."""
        if len(self._tools) == 1:
            next(iter(self._tools.values())).events.append((name, attributes, now))
            return
        span = self._turn or self._provision
        if span is not None:
            span.add_event(name, attributes, now)

    def _pool_counts(self) -> tuple[int, int] | None:
        stats = self._pools().get(self._agent.backend)
        return (stats.hits, stats.misses) if stats is not None else None

    def _warmth(self) -> str:
        """``warm`` (a pooled sandbox was claimed), ``cold``, or ``unknown`` (other jobs claimed
        from the same pool meanwhile, so which one this job got cannot be told)."""
        after = self._pool_counts()
        if self._before is None or after is None:
            return "cold"
        hits, misses = after[0] - self._before[0], after[1] - self._before[1]
        if hits + misses > 1:
            return "unknown"
        return "warm" if hits == 1 else "cold"

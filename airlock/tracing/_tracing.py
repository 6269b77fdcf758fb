"""The controller's job tracing: on (a TracerProvider it owns) or off (no-op objects, the SDK
never imported)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from airlock.config import AgentConfig
from airlock.jobs import Job
from airlock.sandbox import SandboxEvent

from ._execution import Execution, PoolReader
from ._job_trace import LiveJobTrace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider


class ExecutionTrace(Protocol):
    """The spans of one execution of a job's turn."""

    async def observe(self, event: SandboxEvent) -> None:
        """Record a sandbox event of the execution."""

    def end(self, error: BaseException | None) -> None:
        """The execution ended (``error``: how it failed)."""


class JobTrace(Protocol):
    """A job's span and its executions."""

    @property
    def trace_id(self) -> str | None:
        """The trace's id (32 hex digits; None: tracing off)."""

    def execution(self, agent: AgentConfig, pools: PoolReader) -> ExecutionTrace:
        """An execution of the job's turn begins now."""

    def end(self, outcome: str, *, error: bool = False) -> None:
        """The job's span ends with ``outcome``."""


class _OffExecution:
    """Tracing off: records nothing."""

    async def observe(self, event: SandboxEvent) -> None:
        return None

    def end(self, error: BaseException | None) -> None:
        return None


class _Off:
    """Tracing off: records nothing."""

    @property
    def trace_id(self) -> str | None:
        return None

    def execution(self, agent: AgentConfig, pools: PoolReader) -> ExecutionTrace:
        return _OFF_EXECUTION

    def end(self, outcome: str, *, error: bool = False) -> None:
        return None


_OFF_EXECUTION = _OffExecution()
#: The trace of a job when tracing is off (or of a job not running here).
OFF = _Off()


class JobTracing:
    """One trace per job, exported by the provider this controller owns (None: tracing off).

    Use :meth:`from_env` (OTLP/HTTP when the standard ``OTEL_*`` variables ask for it) or
    :meth:`to` (a given span processor, e.g. an in-memory exporter's in tests).
    """

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("airlock.controller") if provider is not None else None
        self._jobs: dict[str, LiveJobTrace] = {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobTracing:
        """OTLP/HTTP export when the environment asks for it, else off."""
        from ._provider import otlp_wanted

        found = os.environ if environ is None else environ
        if not otlp_wanted(found):
            return cls()
        from ._provider import otlp_provider

        return cls(otlp_provider(found))

    @classmethod
    def to(cls, processor: SpanProcessor) -> JobTracing:
        """Tracing handing every span to ``processor``."""
        from ._provider import tracer_provider

        return cls(tracer_provider(processor))

    @property
    def enabled(self) -> bool:
        """Whether spans are recorded."""
        return self._tracer is not None

    def start(self, job: Job) -> JobTrace:
        """``job``'s span begins (under its parent's, for a child running here)."""
        if self._tracer is None:
            return OFF
        parent = self._jobs.get(job.parent_id) if job.parent_id is not None else None
        live = LiveJobTrace(self._tracer, job, parent.span if parent is not None else None)
        self._jobs[job.id] = live
        return _Registered(live, lambda: self._forget(job.id, live))

    def _forget(self, job_id: str, live: LiveJobTrace) -> None:
        if self._jobs.get(job_id) is live:  # not a later run's of the same job
            del self._jobs[job_id]

    def of(self, job_id: str) -> JobTrace:
        """The trace of ``job_id`` while it runs here (else one that records nothing)."""
        live = self._jobs.get(job_id)
        return live if live is not None else OFF

    def shutdown(self) -> None:
        """Export what is buffered and stop (blocking: at most the exporter's timeout)."""
        if self._provider is not None:
            self._provider.shutdown()


class _Registered:
    """A job's live trace that leaves the registry when it ends."""

    def __init__(self, live: LiveJobTrace, forget: Callable[[], object]) -> None:
        self._live = live
        self._forget = forget

    @property
    def trace_id(self) -> str | None:
        return self._live.trace_id

    def execution(self, agent: AgentConfig, pools: PoolReader) -> Execution:
        return self._live.execution(agent, pools)

    def end(self, outcome: str, *, error: bool = False) -> None:
        self._forget()
        self._live.end(outcome, error=error)

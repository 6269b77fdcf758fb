"""JobOrchestrator: the layer0 Orchestrator the effect executor uses for one submitted job."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import JsonValue

from airlock.errors import ConfigError
from airlock.jobs import (
    Job,
    JobEvent,
    JobEventData,
    JobFilter,
    JobOrigin,
    SignalRecorded,
    dispatch_concurrently,
)
from layer0 import (
    AgentId,
    OrchError,
    QueryPayload,
    SignalPayload,
    TurnInput,
    TurnOutput,
    WorkflowId,
)

from ._effect_ledger import SIGNAL, JobLedger
from ._store import JobStore
from ._tenant_state import workflow_key
from .effects import effect_address


class ChildRunner(Protocol):
    """What runs a delegate's or handoff's child job (``at``: the ledger and the address of the
    effect asking for it, which reuses the child it created before, if it did)."""

    async def run_child(
        self,
        parent: Job,
        agent: AgentId,
        input: TurnInput,
        origin: JobOrigin,
        at: tuple[JobLedger, str] | None,
    ) -> tuple[Job, TurnOutput]: ...


class SignalDelivery(Protocol):
    """What hands a signal to a job's running turn."""

    async def deliver(self, job: Job, signal_type: str, data: JsonValue, sender: str | None) -> bool: ...


#: Records an event of a job.
Emit = Callable[[str, JobEventData], Awaitable[JobEvent]]

_log = logging.getLogger("airlock.jobs")


class JobOrchestrator:
    """The layer0 Orchestrator the effect executor uses for one submitted job.

    ``dispatch`` runs the agent as a child job of the submitted one (its own sandbox and
    policy, its own record, under the parent); ``signal`` records the signal durably under
    its workflow and on the job's record; ``query`` answers from those records.
    """

    def __init__(
        self,
        job: Job,
        *,
        children: ChildRunner,
        store: JobStore,
        emit: Emit,
        signals: SignalDelivery,
        ledger: JobLedger | None = None,
        parallel: int = 4,
    ) -> None:
        if parallel < 1:
            raise ConfigError(f"parallel children must be at least 1, got {parallel}")
        self._job = job
        self._ledger = ledger
        self._children = children
        self._store = store
        self._emit = emit
        self._signals = signals
        #: Children of this tree whose turns run at once (the rest wait for a slot).
        self._slots = asyncio.Semaphore(parallel)
        #: Dispatched children whose own effects are not all applied yet, by the address of
        #: the effect that dispatched them (the executor applies several at once).
        self._dispatched: dict[str, Job] = {}

    async def dispatch(self, agent: AgentId, input: TurnInput) -> TurnOutput:
        """Run ``agent`` on ``input`` as a child job of the job whose effect asked for it (at
        most ``parallel`` of this tree's children run at once); its output (``OrchError`` on
        failure)."""
        origin: JobOrigin = (
            "handoff"
            if isinstance(input.metadata, dict) and "handoff_state" in input.metadata
            else "delegate"
        )
        parent = self.current
        address = effect_address()
        at = (self._ledger, address) if self._ledger is not None and address is not None else None
        async with self._slots:
            child, output = await self._children.run_child(parent, agent, input, origin, at)
        if address is not None:
            self._dispatched[address] = child
        return output

    @property
    def current(self) -> Job:
        """The job that declared the effect being applied now (in this task): the submitted
        job, or the child whose dispatching effect's address prefixes it (``2.0`` was declared
        by the child that effect ``2`` dispatched)."""
        address = effect_address()
        if address is None or "." not in address:
            return self._job
        return self._dispatched[address.rsplit(".", 1)[0]]

    def follow_up_done(self) -> Job | None:
        """The executor finished applying the effects of the child the current effect
        dispatched; that child."""
        address = effect_address()
        return self._dispatched.pop(address, None) if address is not None else None

    def pending(self) -> list[Job]:
        """Dispatched children whose effects were not (yet) all applied, outermost first."""
        order = sorted(self._dispatched, key=lambda address: (address.count("."), address))
        return [self._dispatched[address] for address in order]

    async def dispatch_many(self, tasks: list[tuple[AgentId, TurnInput]]) -> list[TurnOutput | OrchError]:
        """Run children concurrently (at most ``parallel`` at once); failures in their places."""
        return await dispatch_concurrently(self.dispatch, tasks)

    async def signal(self, target: WorkflowId, signal: SignalPayload) -> None:
        """Record ``signal`` for ``target`` durably, on this job's record, and on the record of
        every job of that workflow that is not finished (they see it in their watch stream);
        a turn of such a job that runs now receives it at its next step boundary."""
        tenant = self._job.tenant
        key = workflow_key(tenant, str(target))
        address = effect_address()
        once = self._ledger.key(address, SIGNAL) if self._ledger is not None and address else None
        count = await self._store.record_signal(key, signal.signal_type, signal.data, self.current.id, once)
        sent = SignalRecorded(
            target=str(target), signal_type=signal.signal_type, data=signal.data, count=count
        )
        await self._emit(self._job.id, sent)
        receivers = await self._store.find(JobFilter(workflow=str(target), tenant=tenant, limit=100))
        for job in receivers:
            if job.id != self._job.id and not job.state.terminal:
                await self._emit(job.id, sent.model_copy(update={"from_job": self.current.id}))
                await self._signals.deliver(job, signal.signal_type, signal.data, self.current.id)

    async def query(self, target: WorkflowId, query: QueryPayload) -> Any:
        """``signals``: the signals recorded for ``target``; ``signal_count``: how many."""
        signals = await self._store.signals(workflow_key(self._job.tenant, str(target)))
        if query.query_type == "signals":
            return signals
        if query.query_type == "signal_count":
            return len(signals)
        raise OrchError.other(
            f"unknown query_type {query.query_type!r}; this orchestrator answers: signals, signal_count"
        )

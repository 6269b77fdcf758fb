"""RemoteOrchestrator: the layer0 Orchestrator over a controller's API.

Code written against ``layer0.Orchestrator`` runs unchanged against
:class:`airlock.testing.LocalOrchestrator` in a test and against a controller in production:
a dispatch is a submitted job (its own sandbox and policy, durable, audited), a signal goes to
SignalWorkflow, a query to QueryWorkflow."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from airlock.errors import ConfigError
from layer0 import (
    AgentId,
    OrchError,
    QueryPayload,
    SignalPayload,
    TurnError,
    TurnInput,
    TurnOutput,
    WorkflowId,
)

from ._client import ControllerClient, ControllerError
from ._dispatch import dispatch_concurrently
from ._errors import JobErrorKind
from ._model import Job
from ._states import JobState

#: Job error kinds that are the turn's own failure (``OrchError.turn_error``).
_TURN_KINDS = frozenset(
    {
        JobErrorKind.TURN_ERROR,
        JobErrorKind.MODEL,
        JobErrorKind.TOOL,
        JobErrorKind.CONTEXT_ASSEMBLY,
        JobErrorKind.RETRYABLE,
        JobErrorKind.NON_RETRYABLE,
    }
)


class RemoteOrchestrator:
    """A ``layer0.Orchestrator`` whose turns run as jobs of a controller.

    ``dispatch`` submits a job for the agent with the whole ``TurnInput`` (message, session,
    config, metadata, trigger), follows it to its end and returns its output; ``signal`` and
    ``query`` name workflows of the client's tenant. The client is the caller's to close.

    Args:
        client: a client of the controller (its token decides the tenant and permissions).
        workflow: the workflow dispatched jobs are recorded under (None: each its own job id),
            so that ``query(workflow, …)`` sees them.
        queue: the fair-queue key of dispatched jobs (None: the agent's name).
        max_concurrency: cap on jobs in flight in ``dispatch_many`` (None: no cap).
    """

    def __init__(
        self,
        client: ControllerClient,
        *,
        workflow: WorkflowId | str | None = None,
        queue: str | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self._client = client
        self._workflow = str(workflow) if workflow is not None else None
        self._queue = queue
        self._max_concurrency = max_concurrency

    async def dispatch(self, agent: AgentId, input: TurnInput) -> TurnOutput:
        """Run one turn of ``agent`` as a job and wait for its output (a cancelled dispatch
        cancels its job).

        Raises:
            OrchError: ``agent_not_found`` (the controller has no such agent);
                ``turn_error`` (the turn failed); ``dispatch_failed`` (refused: permission,
                quota, bad input; unreachable; the job cancelled, timed out, interrupted,
                its sandbox failed).
        """
        try:
            job = await self._client.submit(str(agent), input, queue=self._queue, workflow=self._workflow)
        except ControllerError as e:
            raise _refused(agent, e) from e
        try:
            final = await self._client.wait(job.id)
        except ControllerError as e:
            raise OrchError.dispatch_failed(f"agent {agent}: job {job.id}: {e}") from e
        except asyncio.CancelledError:
            with contextlib.suppress(ControllerError):
                await asyncio.shield(self._client.cancel(job.id, "its dispatch was cancelled"))
            raise
        if final.state is JobState.SUCCEEDED and final.output is not None:
            return final.output
        raise error_of(agent, final)

    async def dispatch_many(self, tasks: list[tuple[AgentId, TurnInput]]) -> list[TurnOutput | OrchError]:
        """Run the tasks as concurrent jobs; results in input order, each failure (its
        ``OrchError``, never raised) in its place."""
        return await dispatch_concurrently(self.dispatch, tasks, self._max_concurrency)

    async def signal(self, target: WorkflowId, signal: SignalPayload) -> None:
        """Record ``signal`` for ``target`` and deliver it into its running jobs' turns;
        returns once the controller recorded it.

        Raises:
            OrchError: ``signal_failed`` (refused or unreachable).
        """
        try:
            await self._client.signal(str(target), signal.signal_type, signal.data)
        except ControllerError as e:
            raise OrchError.signal_failed(f"workflow {target}: {e}") from e

    async def query(self, target: WorkflowId, query: QueryPayload) -> Any:
        """The controller's answer about ``target`` (QueryWorkflow): ``status``, ``spend``,
        ``budget``, ``signals``, ``signal_count``; the schema of each is QueryWorkflowResponse's.

        Raises:
            OrchError: ``workflow_not_found`` (no job or signal of it in the tenant);
                ``other`` (another query type, refused, unreachable).
        """
        try:
            return await self._client.query_workflow(str(target), query.query_type, query.params)
        except ControllerError as e:
            if e.code == "NOT_FOUND":
                raise OrchError.workflow_not_found(f"{target} (no job or signal of it)") from e
            raise OrchError.other(f"query {query.query_type!r} of workflow {target}: {e}") from e


def _refused(agent: AgentId, error: ControllerError) -> OrchError:
    """The OrchError of a refused submission."""
    if error.code == "NOT_FOUND":
        return OrchError.agent_not_found(f"{agent} ({error})")
    return OrchError.dispatch_failed(f"agent {agent}: {error}")


def error_of(agent: AgentId, job: Job) -> OrchError:
    """Why a finished job has no output, as the OrchError of its dispatch: a turn's failure is
    ``turn_error`` (its ``__cause__`` a TurnError of the job error's kind), an orchestration
    error keeps its kind, anything else is ``dispatch_failed``."""
    where = f"agent {agent}: job {job.id} ended {job.state.value}"
    if job.error is None:
        return OrchError.dispatch_failed(where)
    message = f"{where}: {job.error.message}"
    kind = job.error.kind
    if kind in _TURN_KINDS:
        return OrchError.from_turn_error(_turn_error(kind, message, retryable=job.error.retryable))
    if kind is JobErrorKind.AGENT_NOT_FOUND:
        return OrchError.agent_not_found(message)
    if kind is JobErrorKind.WORKFLOW_NOT_FOUND:
        return OrchError.workflow_not_found(message)
    if kind is JobErrorKind.SIGNAL_FAILED:
        return OrchError.signal_failed(message)
    return OrchError.dispatch_failed(message)


def _turn_error(kind: JobErrorKind, message: str, *, retryable: bool) -> TurnError:
    if kind is JobErrorKind.MODEL:
        return TurnError.model(message)
    if kind is JobErrorKind.CONTEXT_ASSEMBLY:
        return TurnError.context_assembly(message)
    if kind is JobErrorKind.NON_RETRYABLE:
        return TurnError.non_retryable(message)
    if kind is JobErrorKind.RETRYABLE or retryable:
        return TurnError.retryable(message)
    return TurnError.other(message)

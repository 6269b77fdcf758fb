"""LocalOrchestrator: in-process dispatch to registered agents, signals and queries."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from airlock.errors import ConfigError
from layer0 import (
    AgentId,
    EnvError,
    Environment,
    EnvironmentSpec,
    OrchError,
    QueryPayload,
    SignalPayload,
    Turn,
    TurnError,
    TurnInput,
    TurnOutput,
    WorkflowId,
)

#: Query types ``LocalOrchestrator.query`` answers.
QUERY_TYPES = ("status", "signal_count", "signals")


@dataclass(frozen=True)
class _Agent:
    turn: Turn
    environment: Environment | None
    spec: EnvironmentSpec


@dataclass
class _Workflow:
    signal_count: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    recent: deque[SignalPayload] = field(default_factory=deque)


class LocalOrchestrator:
    """A ``layer0.Orchestrator`` running turns as coroutines in this process.

    Agents are registered by id, each a ``layer0.Turn`` optionally wrapped in an
    ``Environment`` (with its ``EnvironmentSpec``). There is no durability: signals
    are recorded in memory (a count per workflow and per signal type, plus the most
    recent ``keep_signals``) and answered by ``query``.

    Every bookkeeping update happens without an ``await`` in between, so any number
    of concurrent coroutines on one event loop may signal or register safely.

    Args:
        max_concurrency: cap on turns running at once in ``dispatch_many`` (None: no cap).
        keep_signals: how many recent signals to keep per workflow.
    """

    def __init__(self, *, max_concurrency: int | None = None, keep_signals: int = 100) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self._agents: dict[AgentId, _Agent] = {}
        self._workflows: dict[WorkflowId, _Workflow] = {}
        self._max_concurrency = max_concurrency
        self._keep_signals = keep_signals

    # -- registration -------------------------------------------------------------------

    def register(
        self,
        agent: AgentId | str,
        turn: Turn,
        *,
        environment: Environment | None = None,
        spec: EnvironmentSpec | None = None,
        replace: bool = False,
    ) -> AgentId:
        """Register ``turn`` as ``agent``; with ``environment`` it runs inside it with ``spec``.

        Raises:
            ConfigError: the id is already registered (and ``replace`` is False), or a
                ``spec`` is given without an ``environment``.
        """
        agent_id = agent if isinstance(agent, AgentId) else AgentId(agent)
        if agent_id in self._agents and not replace:
            raise ConfigError(f"agent {agent_id} is already registered (pass replace=True to replace it)")
        if spec is not None and environment is None:
            raise ConfigError(f"agent {agent_id}: an EnvironmentSpec needs an environment to apply it")
        self._agents[agent_id] = _Agent(turn, environment, spec or EnvironmentSpec())
        return agent_id

    def unregister(self, agent: AgentId | str) -> None:
        """Remove an agent (no-op if absent)."""
        self._agents.pop(agent if isinstance(agent, AgentId) else AgentId(agent), None)

    @property
    def agents(self) -> list[AgentId]:
        """Registered agent ids, sorted."""
        return sorted(self._agents, key=str)

    # -- the protocol -------------------------------------------------------------------

    async def dispatch(self, agent: AgentId, input: TurnInput) -> TurnOutput:
        """Run one turn of ``agent``.

        Raises:
            OrchError: ``agent_not_found`` (the message lists the registered agents);
                ``turn_error`` when the turn raised ``TurnError`` (chained);
                ``dispatch_failed`` when its environment raised ``EnvError`` or the
                turn raised anything else (chained).
        """
        entry = self._agents.get(agent)
        if entry is None:
            known = ", ".join(str(a) for a in self.agents) or "none"
            raise OrchError.agent_not_found(f"{agent} (registered agents: {known})")
        try:
            if entry.environment is None:
                return await entry.turn.execute(input)
            return await entry.environment.run(entry.turn, input, entry.spec)
        except TurnError as e:
            raise OrchError.from_turn_error(e) from e
        except EnvError as e:
            raise OrchError.dispatch_failed(f"agent {agent}: {e}") from e
        except OrchError:
            raise
        except Exception as e:
            raise OrchError.dispatch_failed(f"agent {agent}: {type(e).__name__}: {e}") from e

    async def dispatch_many(self, tasks: list[tuple[AgentId, TurnInput]]) -> list[TurnOutput | OrchError]:
        """Run the tasks concurrently; results in input order, each failure in its place.

        A failed task yields its ``OrchError`` (never raised), leaving the others intact.
        """
        from airlock.jobs import dispatch_concurrently

        return await dispatch_concurrently(self.dispatch, tasks, self._max_concurrency)

    async def signal(self, target: WorkflowId, signal: SignalPayload) -> None:
        """Record ``signal`` for ``target`` (creating the workflow's record on first use)."""
        workflow = self._workflows.get(target)
        if workflow is None:
            workflow = self._workflows[target] = _Workflow(recent=deque(maxlen=self._keep_signals))
        workflow.signal_count += 1
        workflow.by_type[signal.signal_type] += 1
        workflow.recent.append(signal)

    async def query(self, target: WorkflowId, query: QueryPayload) -> Any:
        """Answer what this orchestrator knows about ``target``'s signals.

        ``query_type``: ``"status"`` → ``{"workflow", "signal_count", "signals_by_type",
        "recent_signals"}``; ``"signal_count"`` → an int (``params`` may be
        ``{"signal_type": "…"}`` to count one type); ``"signals"`` → the recent
        signals as wire JSON, oldest first.

        Raises:
            OrchError: ``workflow_not_found`` if ``target`` was never signalled;
                ``other`` for an unknown ``query_type``.
        """
        workflow = self._workflows.get(target)
        if workflow is None:
            raise OrchError.workflow_not_found(f"{target} (no signal has been sent to it)")
        recent = [s.model_dump(mode="json") for s in workflow.recent]
        if query.query_type == "status":
            return {
                "workflow": str(target),
                "signal_count": workflow.signal_count,
                "signals_by_type": dict(sorted(workflow.by_type.items())),
                "recent_signals": recent,
            }
        if query.query_type == "signal_count":
            wanted = query.params.get("signal_type") if isinstance(query.params, dict) else None
            return workflow.by_type[wanted] if isinstance(wanted, str) else workflow.signal_count
        if query.query_type == "signals":
            return recent
        raise OrchError.other(
            f"unknown query_type {query.query_type!r}; LocalOrchestrator answers: {', '.join(QUERY_TYPES)}"
        )

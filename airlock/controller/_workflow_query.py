"""What QueryWorkflow answers about one workflow: its jobs and their states, what they spent,
what limits apply, its signals. Pure functions over the facts the handler gathered
(:mod:`._grpc_workflows`); the schema per query type is the proto's (QueryWorkflowResponse)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from pydantic import JsonValue

from airlock.jobs import Job, TenantUse
from layer0 import decimal_to_str

#: The query types QueryWorkflow answers.
QUERY_TYPES = ("status", "spend", "budget", "signals", "signal_count")


class UnknownQuery(ValueError):
    """A query type QueryWorkflow does not answer."""


@dataclass(frozen=True)
class WorkflowFacts:
    """What the controller knows of one workflow of one tenant."""

    workflow: str
    #: Its jobs (children included: they share their parent's workflow), newest first.
    jobs: Sequence[Job]
    #: Its signals as stored, oldest first.
    signals: Sequence[dict[str, JsonValue]]
    #: The tenant's quotas and their use.
    quotas: TenantUse
    #: An agent's default ``max_cost`` per turn (None: none, or the agent is gone).
    default_max_cost: Callable[[str], Decimal | None]
    #: Each tree budget of the workflow's roots: ``{"root", "decision", "spent", "tokens",
    #: "elapsed_ms", "max_cost", "max_tokens", "max_duration_ms", "model"}``.
    trees: Sequence[JsonValue] = ()

    @property
    def exists(self) -> bool:
        """Whether anything of the workflow is known (else: NOT_FOUND)."""
        return bool(self.jobs or self.signals)


def answer(query_type: str, params: JsonValue, facts: WorkflowFacts) -> JsonValue:
    """The answer to ``query_type`` (see QUERY_TYPES).

    Raises:
        UnknownQuery: any other query type.
    """
    if query_type == "status":
        return status(facts)
    if query_type == "spend":
        return spend(facts)
    if query_type == "budget":
        return budget(facts)
    if query_type == "signals":
        return list(facts.signals)
    if query_type == "signal_count":
        wanted = params.get("signal_type") if isinstance(params, dict) else None
        if isinstance(wanted, str):
            return sum(1 for s in facts.signals if s.get("signal_type") == wanted)
        return len(facts.signals)
    raise UnknownQuery(f"unknown query_type {query_type!r}; QueryWorkflow answers: {', '.join(QUERY_TYPES)}")


def status(facts: WorkflowFacts) -> JsonValue:
    """The workflow's jobs (oldest first) with their states, and its signals counted."""
    jobs = list(reversed(facts.jobs))
    by_type = Counter(str(s.get("signal_type")) for s in facts.signals)
    return {
        "workflow": facts.workflow,
        "jobs": [
            {
                "id": j.id,
                "agent": j.agent,
                "state": j.state.value,
                "parent_id": j.parent_id,
                "created_at": j.created_at.isoformat(),
                "finished_at": j.finished_at.isoformat() if j.finished_at else None,
            }
            for j in jobs
        ],
        "states": dict(sorted(Counter(j.state.value for j in jobs).items())),
        "signal_count": len(facts.signals),
        "signals_by_type": dict(sorted(by_type.items())),
    }


def _cost(job: Job) -> Decimal:
    return job.output.metadata.cost if job.output is not None else Decimal(0)


def spend(facts: WorkflowFacts) -> JsonValue:
    """Tokens and cost of the workflow's jobs that produced an output, in all and per job."""
    jobs = list(reversed(facts.jobs))
    rows: list[JsonValue] = []
    tokens_in = tokens_out = 0
    for j in jobs:
        used_in = j.output.metadata.tokens_in if j.output else 0
        used_out = j.output.metadata.tokens_out if j.output else 0
        tokens_in, tokens_out = tokens_in + used_in, tokens_out + used_out
        rows.append(
            {
                "id": j.id,
                "agent": j.agent,
                "tokens_in": used_in,
                "tokens_out": used_out,
                "cost": decimal_to_str(_cost(j)),
            }
        )
    return {
        "workflow": facts.workflow,
        "jobs": len(jobs),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost": decimal_to_str(sum((_cost(j) for j in jobs), Decimal(0))),
        "by_job": rows,
    }


def _max_cost(job: Job, facts: WorkflowFacts) -> Decimal | None:
    own = job.input.config.max_cost if job.input.config is not None else None
    return own if own is not None else facts.default_max_cost(job.agent)


def budget(facts: WorkflowFacts) -> JsonValue:
    """The limits that apply: each job's per-turn ``max_cost`` (its own, else its agent's) and
    what is left of it, each tree budget of its roots (spent, limits, last decision), and the
    tenant's quotas with what remains (no limit: null)."""
    jobs = list(reversed(facts.jobs))
    rows: list[JsonValue] = []
    for j in jobs:
        limit = _max_cost(j, facts)
        spent = _cost(j)
        rows.append(
            {
                "id": j.id,
                "agent": j.agent,
                "max_cost": decimal_to_str(limit) if limit is not None else None,
                "spent": decimal_to_str(spent),
                "remaining": decimal_to_str(max(Decimal(0), limit - spent)) if limit is not None else None,
            }
        )
    quotas: list[JsonValue] = [
        {"quota": q.quota, "limit": q.limit, "used": q.used, "remaining": _remaining(q.limit, q.used)}
        for q in facts.quotas.quotas
    ]
    return {
        "workflow": facts.workflow,
        "spent": decimal_to_str(sum((_cost(j) for j in jobs), Decimal(0))),
        "jobs": rows,
        "trees": list(facts.trees),
        "quotas": quotas,
    }


def _remaining(limit: str | None, used: str) -> str | None:
    if limit is None:
        return None
    try:
        return decimal_to_str(max(Decimal(0), Decimal(limit) - Decimal(used)))
    except ArithmeticError:
        return None

"""What the controller holds of one job tree's budget, and what the tree spent: counted from
the store (finished jobs' outputs, running ones' checkpoints), raised by the live totals its
running turns report, and its decisions as the root's ``tree_budget`` events left them (so a
replica that takes the tree over goes on from there)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from decimal import Decimal

from airlock.config import TreeBudget
from airlock.jobs import Job, TreeBudgetChanged, utcnow
from airlock.turn import SessionState

from ._budget_policy import TreeUse
from ._store import JobStore


@dataclass
class TreeState:
    """One tree's budget as this replica follows it."""

    root: Job
    budget: TreeBudget
    model: str | None
    #: Each running job of the tree (its turn here) and its live totals.
    running: dict[str, Job] = field(default_factory=dict)
    live: dict[str, TreeUse] = field(default_factory=dict)
    #: The signals each running job was handed (so each is handed once).
    told: dict[str, set[str]] = field(default_factory=dict)
    decision: str = ""
    downgraded: bool = False
    halted: str | None = None
    timer: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Cost granted by approved increases; the open question to the approvers (None: none),
    #: answered ``(approved, by whom)``; whether one was refused (the tree asks no more).
    extra: Decimal = Decimal(0)
    asking: asyncio.Future[tuple[bool, str]] | None = None
    refused: bool = False
    waiter: asyncio.Task[None] | None = None
    #: Set while no question is open (admissions wait for the answer).
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def max_cost(self) -> Decimal | None:
        """The cost limit with the increases granted."""
        limit = self.budget.max_cost
        return limit + self.extra if limit is not None else None


def elapsed_ms(tree: TreeState) -> int:
    """Wall time since the tree's root started (was submitted, before it started), until it
    finished."""
    since = tree.root.started_at or tree.root.created_at
    until = tree.root.finished_at or utcnow()
    return max(0, int((until - since).total_seconds() * 1000))


async def tree_use(store: JobStore, tree: TreeState) -> TreeUse:
    """What ``tree`` spent: each job's stored totals (output, else checkpoint), raised by the
    live totals its running turns reported to this replica."""
    total = TreeUse(elapsed_ms=elapsed_ms(tree))
    pending = [tree.root.id]
    while pending:
        job = await store.get(pending.pop())
        if job is None:
            continue
        pending += job.children
        stored = await stored_use(store, job)
        live = tree.live.get(job.id)
        total += live if live is not None and live.cost >= stored.cost else stored
    return total


async def stored_use(store: JobStore, job: Job) -> TreeUse:
    """A job's totals as the store has them."""
    if job.output is not None:
        meta = job.output.metadata
        return TreeUse(meta.cost, meta.tokens_in + meta.tokens_out)
    saved = await store.checkpoint(job.id)
    if saved is None:
        return TreeUse()
    state = SessionState.model_validate_json(saved[0])
    return TreeUse(state.cost, state.tokens_in + state.tokens_out)


async def last_decision(store: JobStore, root: str) -> TreeBudgetChanged | None:
    """The root's latest ``tree_budget`` event (None: none yet)."""
    told = await store.events(root, kind="tree_budget")
    last = told[-1].data if told else None
    return last if isinstance(last, TreeBudgetChanged) else None


async def restore(store: JobStore, tree: TreeState) -> None:
    """Take up ``tree``'s decisions where its root's events leave them: the increases granted,
    the downgrade, the halt (an open question to the approvers is asked again)."""
    last = await last_decision(store, tree.root.id)
    if last is None:
        return
    limit = tree.budget.max_cost
    if limit is not None and last.max_cost is not None and last.max_cost > limit:
        tree.extra = last.max_cost - limit
    tree.downgraded = last.model is not None
    if last.decision == "halt_workflow":
        tree.decision, tree.halted = last.decision, last.reason or "exhausted"
    elif last.decision != "request_increase":
        tree.decision = last.decision

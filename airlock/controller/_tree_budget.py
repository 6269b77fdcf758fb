"""A budget across a delegation tree, enforced by the controller: the root's agent declares it
(``tree_budget:``) and every job of the tree draws from it.

A child is not started once the tree is exhausted; one that starts gets its turn's
``max_cost`` capped to what the tree has left (before its input is recorded). Running turns of
the tree hear the policy's decisions at their next step boundary, as ``budget`` signals: the
cheaper model past ``downgrade.at``, ``max_cost: 0`` (exit reason ``budget_exhausted``) at
exhaustion, also when the tree's wall time runs out (a timer per tree). Spend is counted from
the store (finished jobs' outputs, running ones' checkpoints), raised by the live totals each
model call reports here, so a replica that takes a tree over recomputes it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from decimal import Decimal

from pydantic import JsonValue

from airlock.config import AgentConfig
from airlock.errors import ConfigError
from airlock.jobs import Job, TreeBudgetChanged, TreeBudgetUse
from airlock.turn import InferenceFinished
from layer0 import OrchError, TurnConfig, TurnInput

from ._budget_policy import TreeUse, decide, exhausted
from ._job_events import JobEvents
from ._quotas import capped
from ._service_settings import JobNotAwaiting, NotAnApprover
from ._tree_state import TreeState, elapsed_ms, restore, tree_use

_log = logging.getLogger("airlock.jobs")

#: Hands a signal to a job's running turn (False: none runs).
Deliver = Callable[[Job, str, JsonValue, "str | None"], Awaitable[bool]]

#: A ``budget`` signal that ends a turn at its next step (exit reason ``budget_exhausted``).
HALT: dict[str, JsonValue] = {"max_cost": "0"}


class TreeBudgets:
    """Each tree's budget: admission of its children, their caps, and its running turns' limits.

    Args:
        events: the job record (the store, and the root's ``tree_budget`` events).
        resolve: an agent's configuration (the root's ``tree_budget``).
        deliver: hands a ``budget`` signal to a running turn.
        pause: pauses a job's running turn at its next step (an increase is asked for);
            ``resume`` lets it run on (both: nothing when no turn of it runs).
    """

    def __init__(
        self,
        events: JobEvents,
        resolve: Callable[[str], AgentConfig],
        deliver: Deliver,
        pause: Callable[[str], Awaitable[None]] = lambda job_id: asyncio.sleep(0),
        resume: Callable[[str], Awaitable[None]] = lambda job_id: asyncio.sleep(0),
    ) -> None:
        self._events = events
        self._store = events.store
        self._resolve = resolve
        self._deliver = deliver
        self._pause = pause
        self._resume = resume
        self._trees: dict[str, TreeState | None] = {}
        self._roots: dict[str, str] = {}

    async def _root(self, job: Job) -> Job:
        """The submitted job at the top of ``job``'s tree (up through its parents)."""
        known = self._roots.get(job.id)
        if known is not None and (root := await self._store.get(known)) is not None:
            return root
        start = job.id
        while job.parent_id is not None and (parent := await self._store.get(job.parent_id)) is not None:
            job = parent
        self._roots[start] = job.id
        return job

    async def _tree(self, job: Job) -> TreeState | None:
        """The budget of ``job``'s tree (None: its root's agent declares none)."""
        root = await self._root(job)
        if root.id in self._trees:
            return self._trees[root.id]
        config = self._budget(root)
        budget = config.tree_budget if config is not None else None
        tree = None
        if budget is not None and config is not None:
            tree = await self._restored(root, config)
            tree.answered.set()
            if root.id in self._trees:  # another of its jobs took it up meanwhile
                return self._trees[root.id]
            if budget.max_duration is not None:
                tree.timer = asyncio.create_task(self._clock(tree), name=f"airlock-tree-budget-{root.id}")
        self._trees[root.id] = tree
        return tree

    async def _restored(self, root: Job, config: AgentConfig) -> TreeState:
        """A state of ``root``'s tree as the root's ``tree_budget`` events leave it (a tree
        another replica, or an earlier run, followed before)."""
        assert config.tree_budget is not None
        tree = TreeState(root=root, budget=config.tree_budget, model=config.spec.provider.model)
        await restore(self._store, tree)
        return tree

    def _budget(self, root: Job) -> AgentConfig | None:
        """The root's agent, when it declares a ``tree_budget``."""
        if root.parent_id is not None:
            return None
        try:
            config = self._resolve(root.agent)
        except ConfigError:
            return None
        return config if config.tree_budget is not None else None

    async def now(self, job: Job) -> TreeBudgetUse | None:
        """What the tree ``job`` roots spent against its budget now, and the decision (None:
        not a root, or its agent declares no budget)."""
        followed = self._trees.get(job.id)
        config = self._budget(job)
        if config is None or config.tree_budget is None:
            return None
        budget = config.tree_budget
        tree = followed if followed is not None else await self._restored(job, config)
        use = await self.use(tree)
        decision = tree.decision or decide(budget, use, model=tree.model, downgraded=False).kind
        return TreeBudgetUse.model_validate(
            {
                "decision": decision,
                "spent": use.cost,
                "tokens": use.tokens,
                "elapsed_ms": use.elapsed_ms,
                "max_cost": tree.max_cost,
                "max_tokens": budget.max_tokens,
                "max_duration_ms": budget.max_duration,
                "model": budget.downgrade.model if budget.downgrade and tree.downgraded else None,
            }
        )

    async def use(self, tree: TreeState) -> TreeUse:
        """What ``tree`` spent (see :func:`tree_use`)."""
        return await tree_use(self._store, tree)

    async def admit(self, parent: Job, agent: str) -> None:
        """A child of ``parent`` may start: its tree is not exhausted.

        Raises:
            OrchError: the tree budget is exhausted (the reason names it and what was spent).
        """
        tree = await self._tree(parent)
        if tree is None:
            return
        await self._settle(tree)
        await tree.answered.wait()  # an increase asked for: its answer first
        why = tree.halted or exhausted(tree.budget, await self.use(tree), tree.extra)
        if why is not None:
            await self._settle(tree)
            raise OrchError.other(
                f"child {agent} not started: the tree budget of job {tree.root.id} is exhausted ({why})"
            )

    async def cap(self, job: Job, input: TurnInput, default: Decimal | None) -> TurnInput:
        """``input`` with its ``max_cost`` at most what the tree has left (0 once halted), and the
        cheaper model once the tree was downgraded; the job's turn is followed from now on."""
        tree = await self._tree(job)
        if tree is None:
            return input
        tree.running[job.id] = job
        if tree.decision == "":
            await self._settle(tree)
        use = await self.use(tree)
        limit = tree.max_cost
        left = max(Decimal(0), limit - use.cost) if limit is not None else None
        input = capped(input, default, Decimal(0) if tree.halted else left)
        if tree.downgraded and tree.budget.downgrade is not None:
            config = input.config or TurnConfig()
            model = tree.budget.downgrade.model
            input = input.model_copy(update={"config": config.model_copy(update={"model": model})})
            tree.told.setdefault(job.id, set()).add("model")
        return input

    async def observe(self, job: Job, event: InferenceFinished) -> None:
        """A model call of ``job`` returned: count its turn's totals, decide, tell the tree."""
        tree = await self._tree(job)
        if tree is None:
            return
        tree.running.setdefault(job.id, job)
        tree.live[job.id] = TreeUse(event.total_cost, event.total_tokens_in + event.total_tokens_out)
        await self._settle(tree)

    def ended(self, job: Job) -> None:
        """``job``'s turn ended here: its totals are the store's now."""
        tree = self._trees.get(self._roots.get(job.id, job.id))
        if tree is not None:
            tree.running.pop(job.id, None)
            tree.told.pop(job.id, None)

    def forget(self, root: str) -> None:
        """Stop following ``root``'s tree (its timer too): the root's run ended."""
        tree = self._trees.pop(root, None)
        if tree is not None and tree.timer is not None:
            tree.timer.cancel()
        if tree is not None and tree.waiter is not None:
            tree.waiter.cancel()
        for job_id in [j for j, r in self._roots.items() if r == root]:
            del self._roots[job_id]

    async def close(self) -> None:
        """Stop every tree's timer."""
        for root in list(self._trees):
            self.forget(root)

    async def _settle(self, tree: TreeState) -> None:
        """Decide on the tree's spend; record a changed decision on the root and hand the
        running turns what it asks (the cheaper model, the halt, or a pause while the
        approvers are asked for more). Nothing changes while a question is open."""
        async with tree.lock:
            if tree.asking is not None:
                return
            use = await self.use(tree)
            decision = decide(
                tree.budget,
                use,
                model=tree.model,
                downgraded=tree.downgraded,
                extra=tree.extra,
                may_ask=not tree.refused,
            )
            kind = decision.kind
            if kind == "request_increase":
                await self._ask(tree, use)
                return
            if kind == "halt_workflow" and tree.halted is None:
                tree.halted = exhausted(tree.budget, use, tree.extra)
            if kind == "downgrade_model":
                tree.downgraded = True
            if kind != tree.decision and not (kind == "continue" and tree.decision):
                tree.decision = kind
                await self._record(tree, use, kind)
            await self._tell(tree)

    async def _record(self, tree: TreeState, use: TreeUse, kind: str, reason: str | None = None) -> None:
        budget = tree.budget
        down = budget.downgrade
        reasons = {
            "continue": "under the tree's limits",
            "downgrade_model": f"past {down.at:g} of a limit: later calls use {down.model}" if down else "",
            "halt_workflow": f"exhausted: {tree.halted}; the tree's running turns stop at their next step",
        }
        data = TreeBudgetChanged(
            decision=kind,
            spent=use.cost,
            tokens=use.tokens,
            elapsed_ms=use.elapsed_ms,
            max_cost=tree.max_cost,
            max_tokens=budget.max_tokens,
            max_duration_ms=budget.max_duration,
            model=down.model if down is not None and tree.downgraded else None,
            reason=reason if reason is not None else reasons.get(kind, ""),
        )
        await self._events.emit(tree.root.id, data)

    # -- an increase asked of the approvers -----------------------------------------------------

    async def _ask(self, tree: TreeState, use: TreeUse) -> None:
        """Pause the tree's running turns and ask the approvers for more (the lock held)."""
        increase = tree.budget.increase
        assert increase is not None
        tree.asking = asyncio.get_running_loop().create_future()
        tree.answered.clear()
        tree.decision = "request_increase"
        who = ", ".join(increase.approvers)
        reason = f"max_cost reached: asking {who} for {increase.amount} more; the tree's turns pause"
        await self._record(tree, use, "request_increase", reason)
        for job_id in list(tree.running):
            await self._pause(job_id)
        name = f"airlock-tree-increase-{tree.root.id}"
        tree.waiter = asyncio.create_task(self._await_answer(tree), name=name)

    def asking(self, root: str) -> bool:
        """Whether ``root``'s tree waits for an approver to grant it more."""
        tree = self._trees.get(root)
        return tree is not None and tree.asking is not None and not tree.asking.done()

    def answer(self, root: str, approver: str, approve: bool) -> None:
        """``approver`` grants (``approve``) or refuses the increase ``root``'s tree asks for.

        Raises:
            JobNotAwaiting: the tree asks for none.
            NotAnApprover: ``approver`` is not one of its ``increase.approvers``.
        """
        tree = self._trees.get(root)
        if tree is None or tree.asking is None or tree.asking.done():
            raise JobNotAwaiting(f"job {root}'s tree budget asks for no increase")
        increase = tree.budget.increase
        if increase is None or approver not in increase.approvers:
            allowed = ", ".join(increase.approvers) if increase is not None else "none"
            raise NotAnApprover(
                f"{approver!r} may not grant job {root}'s tree more; its approvers: {allowed}"
            )
        tree.asking.set_result((approve, approver))

    async def _await_answer(self, tree: TreeState) -> None:
        """The approvers' answer (no answer within the timeout: refused); then the tree runs on
        with the increase, or halts."""
        increase = tree.budget.increase
        assert increase is not None and tree.asking is not None
        try:
            approved, who = await asyncio.wait_for(asyncio.shield(tree.asking), increase.timeout / 1000)
        except TimeoutError:
            approved, who = False, f"nobody within {increase.timeout} ms"
        async with tree.lock:
            tree.asking = None
            use = await self.use(tree)
            if approved:
                tree.extra += increase.amount
                tree.decision = "continue"
                reason = f"{who} granted {increase.amount} more: max_cost is now {tree.max_cost}"
            else:
                tree.refused = True
                tree.decision = "halt_workflow"
                tree.halted = f"{exhausted(tree.budget, use, tree.extra)}; the increase was refused by {who}"
                reason = f"exhausted: {tree.halted}; the tree's running turns stop at their next step"
            await self._record(tree, use, tree.decision, reason)
            await self._tell(tree)
            for job_id in list(tree.running):
                await self._resume(job_id)
            tree.answered.set()
        await self._settle(tree)  # more than the increase may be spent already

    async def _tell(self, tree: TreeState) -> None:
        """Hand each running turn of the tree the signals it has not had yet."""
        wanted: list[tuple[str, dict[str, JsonValue]]] = []
        if tree.downgraded and tree.budget.downgrade is not None:
            wanted.append(("model", {"model": tree.budget.downgrade.model}))
        if tree.halted is not None:
            wanted.append(("halt", HALT))
        for job_id, job in list(tree.running.items()):
            told = tree.told.setdefault(job_id, set())
            for name, data in wanted:
                if name not in told and await self._deliver(job, "budget", data, None):
                    told.add(name)

    async def _clock(self, tree: TreeState) -> None:
        """Halt the tree when its wall time runs out."""
        assert tree.budget.max_duration is not None
        left_ms = tree.budget.max_duration - elapsed_ms(tree)
        await asyncio.sleep(max(0, left_ms) / 1000)
        try:
            await self._settle(tree)
        except Exception:  # the tree's jobs stop at their own limits still
            _log.exception("tree %s: its wall time ran out but it could not be halted", tree.root.id)

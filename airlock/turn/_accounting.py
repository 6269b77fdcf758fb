"""A turn's accounting: each model call's tokens and cost, budget warnings, the limits
(turns, cost, time), and compaction (the context strategy's, with its summary calls counted,
and the provider's own)."""

from __future__ import annotations

from decimal import Decimal

from layer0 import (
    AgentId,
    BudgetWarning,
    CompactionComplete,
    Content,
    ContextPressure,
    CostIncurred,
    ExitReason,
    LogLevel,
    PreCompactionFlush,
    ProviderManaged,
    Scope,
)

from ._context import as_compaction, estimate_tokens
from ._events import ContextCompacted
from ._run_log import due_warnings, workflow_of
from ._step_context import StepContext
from ._types import CompactionPart, ProviderRequest, ProviderResponse


class Accounting:
    """Counting model calls against the turn's limits, and compacting its context."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx

    def add_usage(self, response: ProviderResponse) -> None:
        """Count a model call's tokens and cost in the turn's."""
        st = self._ctx.state
        st.tokens_in += response.usage.input_tokens
        st.tokens_out += response.usage.output_tokens
        if response.cost is not None:
            st.cost += response.cost

    async def after_call(self, response: ProviderResponse, what: str) -> None:
        """After a model call was counted: its retries logged, its cost and the budget
        warnings it crossed reported."""
        ctx = self._ctx
        st, turn = ctx.state, ctx.turn
        if response.retries:
            ctx.run_log(
                LogLevel.WARN,
                f"{what}: provider {turn.provider.name} retried it {len(response.retries)} time(s) "
                f"({', '.join(response.retries)})",
                {"retries": list(response.retries)},
            )
        if ctx.observed():
            cost = response.cost if response.cost is not None else Decimal(0)
            await ctx.observe(CostIncurred(agent=AgentId(turn.name), cost=cost, cumulative=st.cost))
        limit = ctx.cfg.max_cost
        for fraction in due_warnings(st.cost, limit, turn.limits.budget_warnings, st.budget_warned):
            assert limit is not None
            st.budget_warned.append(fraction)
            workflow = workflow_of(st.input, turn.name)
            await ctx.observe(BudgetWarning(workflow=workflow, spent=st.cost, limit=limit))

    def limit_exit(self) -> ExitReason | None:
        """The limit the turn has reached (time, cost, model calls), if any."""
        ctx = self._ctx
        st, cfg = ctx.state, ctx.cfg
        if cfg.max_duration_ms is not None and ctx.elapsed_ms() >= cfg.max_duration_ms:
            return ExitReason.timeout()
        if cfg.max_cost is not None and st.cost >= cfg.max_cost:
            return ExitReason.budget_exhausted()
        if st.iterations >= cfg.max_turns:
            return ExitReason.max_turns()
        return None

    async def compact_if_due(self) -> None:
        """Compact the conversation when the turn's strategy says it is time."""
        turn = self._ctx.turn
        if turn.context.should_compact(self._ctx.state.messages, turn.context_limit):
            await self.compact()

    async def compact(self) -> None:
        """Compact the conversation with the turn's strategy, counting its model calls."""
        ctx = self._ctx
        st, turn = ctx.state, ctx.turn
        strategy = turn.context
        name = type(strategy).__name__
        agent = AgentId(turn.name)
        before = strategy.token_estimate(st.messages)
        limit = turn.context_limit
        fill = round(100 * before / limit, 2) if limit > 0 else 100.0
        pressure = ContextPressure(
            agent=agent, fill_percent=fill, tokens_used=before, tokens_available=max(limit, 0)
        )
        await ctx.observe(pressure)
        session = st.input.session
        scope = Scope.session(session) if session is not None else Scope.global_()
        await ctx.observe(PreCompactionFlush(agent=agent, scope=scope))
        done = as_compaction(await ctx.within_deadline(strategy.compact(list(st.messages))))
        for call in done.calls:
            self.add_usage(call)
            await self.after_call(call, f"the {name} strategy's summary call")
        sizes = {"messages_before": len(st.messages), "messages_after": len(done.messages)}
        await ctx.emit(ContextCompacted(strategy=name, **sizes))
        freed = max(0, before - strategy.token_estimate(done.messages))
        if done.calls or done.messages != st.messages:  # a strategy finding no cut changes nothing
            ctx.run_log(
                LogLevel.INFO,
                f"context compacted by {name}: {len(st.messages)} → {len(done.messages)} messages, "
                f"about {freed} tokens freed",
                {"strategy": name, "tokens_freed": freed, "model_calls": len(done.calls)},
            )
        st.messages = done.messages
        ctx.journaled = 0
        ctx.unsaved = True
        await ctx.observe(CompactionComplete(agent=agent, strategy=name, tokens_freed=freed))

    async def provider_compacted(self, request: ProviderRequest, response: ProviderResponse) -> None:
        """The provider compacted the context server-side during ``response``'s call."""
        ctx = self._ctx
        report = response.compaction
        before = report.tokens_before if report is not None else None
        after = report.tokens_after if report is not None else None
        before = before if before is not None else estimate_tokens(request.messages)
        after = after if after is not None else estimate_tokens(ctx.state.messages)
        summaries = [p.summary for p in response.content if isinstance(p, CompactionPart) and p.summary]
        provider = ctx.turn.provider.name
        ctx.run_log(
            LogLevel.INFO,
            f"provider {provider} compacted the context server-side: about {before} → {after} tokens",
            {"provider": provider, "tokens_before": before, "tokens_after": after},
        )
        await ctx.observe(
            ProviderManaged(
                agent=AgentId(ctx.turn.name),
                provider=provider,
                tokens_before=before,
                tokens_after=after,
                summary=Content.text(summaries[-1]) if summaries else None,
            )
        )

"""A turn session's accounting: each model call's tokens and cost, budget warnings, and
compaction (the context strategy's, with its summary calls counted, and the provider's own)."""

from __future__ import annotations

from decimal import Decimal

from layer0 import (
    AgentId,
    BudgetWarning,
    CompactionComplete,
    Content,
    ContextPressure,
    CostIncurred,
    LogLevel,
    PreCompactionFlush,
    ProviderManaged,
    Scope,
)

from ._config import DeadlineReached
from ._context import as_compaction, estimate_tokens
from ._events import ContextCompacted
from ._run_log import due_warnings, workflow_of
from ._session_base import SessionBase
from ._types import CompactionPart, ProviderRequest, ProviderResponse


class SessionAccounting(SessionBase):
    """Counting model calls and compacting the context (part of ``TurnSession``)."""

    def _add_usage(self, response: ProviderResponse) -> None:
        """Count a model call's tokens and cost in the turn's."""
        st = self._state
        st.tokens_in += response.usage.input_tokens
        st.tokens_out += response.usage.output_tokens
        if response.cost is not None:
            st.cost += response.cost

    async def _after_call(self, response: ProviderResponse, what: str) -> None:
        """After a model call was counted: its retries logged, its cost and the budget
        warnings it crossed reported."""
        st = self._state
        if response.retries:
            self._run_log(
                LogLevel.WARN,
                f"{what}: provider {self._turn.provider.name} retried it {len(response.retries)} time(s) "
                f"({', '.join(response.retries)})",
                {"retries": list(response.retries)},
            )
        if self._observed():
            cost = response.cost if response.cost is not None else Decimal(0)
            await self._observe(CostIncurred(agent=AgentId(self._turn.name), cost=cost, cumulative=st.cost))
        limit = self._cfg.max_cost
        for fraction in due_warnings(st.cost, limit, self._turn.limits.budget_warnings, st.budget_warned):
            assert limit is not None
            st.budget_warned.append(fraction)
            workflow = workflow_of(st.input, self._turn.name)
            await self._observe(BudgetWarning(workflow=workflow, spent=st.cost, limit=limit))

    async def _compact(self) -> None:
        """Compact the conversation with the turn's strategy, counting its model calls."""
        st = self._state
        turn = self._turn
        strategy = turn.context
        name = type(strategy).__name__
        agent = AgentId(turn.name)
        before = strategy.token_estimate(st.messages)
        limit = turn.context_limit
        fill = round(100 * before / limit, 2) if limit > 0 else 100.0
        pressure = ContextPressure(
            agent=agent, fill_percent=fill, tokens_used=before, tokens_available=max(limit, 0)
        )
        await self._observe(pressure)
        session = st.input.session
        scope = Scope.session(session) if session is not None else Scope.global_()
        await self._observe(PreCompactionFlush(agent=agent, scope=scope))
        deadline = self._deadline()
        try:
            async with deadline:
                done = as_compaction(await strategy.compact(list(st.messages)))
        except TimeoutError:
            if deadline.expired():
                raise DeadlineReached from None
            raise
        for call in done.calls:
            self._add_usage(call)
            await self._after_call(call, f"the {name} strategy's summary call")
        sizes = {"messages_before": len(st.messages), "messages_after": len(done.messages)}
        await self._emit(ContextCompacted(strategy=name, **sizes))
        freed = max(0, before - strategy.token_estimate(done.messages))
        if done.calls or done.messages != st.messages:  # a strategy finding no cut changes nothing
            self._run_log(
                LogLevel.INFO,
                f"context compacted by {name}: {len(st.messages)} → {len(done.messages)} messages, "
                f"about {freed} tokens freed",
                {"strategy": name, "tokens_freed": freed, "model_calls": len(done.calls)},
            )
        st.messages = done.messages
        self._journaled = 0
        self._unsaved = True
        await self._observe(CompactionComplete(agent=agent, strategy=name, tokens_freed=freed))

    async def _provider_compacted(self, request: ProviderRequest, response: ProviderResponse) -> None:
        """The provider compacted the context server-side during ``response``'s call."""
        st = self._state
        report = response.compaction
        before = report.tokens_before if report is not None else None
        after = report.tokens_after if report is not None else None
        before = before if before is not None else estimate_tokens(request.messages)
        after = after if after is not None else estimate_tokens(st.messages)
        summaries = [p.summary for p in response.content if isinstance(p, CompactionPart) and p.summary]
        provider = self._turn.provider.name
        self._run_log(
            LogLevel.INFO,
            f"provider {provider} compacted the context server-side: about {before} → {after} tokens",
            {"provider": provider, "tokens_before": before, "tokens_after": after},
        )
        await self._observe(
            ProviderManaged(
                agent=AgentId(self._turn.name),
                provider=provider,
                tokens_before=before,
                tokens_after=after,
                summary=Content.text(summaries[-1]) if summaries else None,
            )
        )

"""NeuronTurn loop overhead: time per iteration that is the loop's own, not the model's or a tool's.

Each turn makes N model calls: N-1 ask for one trivial tool (``add``), the last ends the turn.
The provider answers instantly (a prebuilt response), so what is measured is the loop:
request building, hook/event plumbing, tool dispatch with schema validation, result
backfill, bookkeeping and the final TurnOutput (with its history effect).

Rows:
- ``instant``: a provider returning prebuilt responses (pure loop cost);
- ``instant+hooks+events``: the same with a BudgetHook, a LoggingHook (at WARNING, so it
  formats nothing) and an event sink attached;
- ``scripted``: the real ``airlock.providers.ScriptedProvider`` (adds its signature matching).

Target (issue 3): under 1 ms per iteration.

Usage: ``python bench/loop_overhead.py [--iterations 10 50 200] [--repeats 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from decimal import Decimal

from airlock.providers import ScriptedProvider
from airlock.turn import (
    BudgetHook,
    LoggingHook,
    NeuronTurn,
    Provider,
    ProviderRequest,
    ProviderResponse,
    StopReason,
    TextPart,
    TokenUsage,
    ToolUsePart,
    TurnEvent,
    tool,
)
from layer0 import Hook, SessionId, TurnConfig, TurnInput


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def responses(n: int) -> list[ProviderResponse]:
    usage = TokenUsage(input_tokens=100, output_tokens=20)
    calls = [
        ProviderResponse(
            content=[ToolUsePart(id=f"t{i}", name="add", input={"a": i, "b": 1})],
            stop_reason=StopReason.TOOL_USE,
            usage=usage,
            cost=Decimal("0.0001"),
        )
        for i in range(n - 1)
    ]
    done = ProviderResponse(
        content=[TextPart(text="done")], stop_reason=StopReason.END_TURN, usage=usage, cost=Decimal("0.0001")
    )
    return [*calls, done]


class InstantProvider:
    """Answers each call with the next prebuilt response, doing nothing else."""

    name = "instant"

    def __init__(self, script: list[ProviderResponse]) -> None:
        self._script = script
        self._i = 0

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        response = self._script[self._i]
        self._i += 1
        return response


async def _sink(event: TurnEvent) -> None:
    return None


def build(kind: str, n: int) -> NeuronTurn:
    provider: Provider
    if kind == "scripted":
        provider = ScriptedProvider([{"response": r.model_dump(mode="json")} for r in responses(n)])
        return NeuronTurn(provider, tools=[add])
    provider = InstantProvider(responses(n))
    if kind == "instant":
        return NeuronTurn(provider, tools=[add])
    hooks: list[Hook] = [BudgetHook(Decimal("100")), LoggingHook(level=logging.DEBUG)]
    return NeuronTurn(provider, tools=[add], hooks=hooks, events=_sink)


async def measure(kind: str, n: int, repeats: int) -> list[float]:
    """Per-iteration milliseconds of ``repeats`` turns of ``n`` model calls each."""
    per_iteration: list[float] = []
    inputs = TurnInput.new("go", session=SessionId("bench"), config=TurnConfig(max_turns=n + 1))
    for _ in range(repeats):
        turn = build(kind, n)
        t0 = time.perf_counter()
        out = await turn.execute(inputs)
        elapsed = time.perf_counter() - t0
        assert out.metadata.turns_used == n and len(out.metadata.tools_called) == n - 1
        per_iteration.append(elapsed * 1000 / n)
    return per_iteration


async def main(iterations: list[int], repeats: int) -> None:
    logging.getLogger("airlock.turn.hooks").setLevel(logging.WARNING)
    kinds = ["instant", "instant+hooks+events", "scripted"]
    await measure("instant", 5, 3)  # warm-up (imports, pydantic schema caches)
    print(f"{'provider':<22} {'calls/turn':>10} {'p50 ms/iter':>12} {'p95 ms/iter':>12} {'min ms/iter':>12}")
    print("-" * 72)
    worst = 0.0
    for kind in kinds:
        for n in iterations:
            samples = sorted(await measure(kind, n, repeats))
            p50 = statistics.median(samples)
            p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
            worst = max(worst, p50)
            print(f"{kind:<22} {n:>10} {p50:>12.3f} {p95:>12.3f} {samples[0]:>12.3f}")
    verdict = "OK" if worst < 1.0 else "OVER TARGET"
    print(f"\nworst p50: {worst:.3f} ms/iteration (target < 1 ms): {verdict}")


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--repeats", type=int, default=20)
    return parser.parse_args()


if __name__ == "__main__":
    args = _parse()
    asyncio.run(main(args.iterations, args.repeats))

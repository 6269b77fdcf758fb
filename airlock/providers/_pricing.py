"""Anthropic model prices as dated data, and the cost of one call from its usage.

Prices are USD per million tokens, as published by Anthropic on :data:`PRICES_AS_OF`
(re-check before a release). All arithmetic is ``Decimal``. A model missing from the table
has no price: :func:`anthropic_cost` returns ``None`` and logs a warning, never a guess.

The cost of a call uses all four usage counters: uncached input, cache writes (5-minute
and 1-hour TTL priced separately when the breakdown is reported, otherwise at the
5-minute rate, the API's default TTL), cache reads and output. A model with a
long-prompt band (Haiku 5.5) prices *every* token of the request at the band's rates
when the prompt (input + cache writes + cache reads) exceeds the threshold.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from airlock.turn import TokenUsage

log = logging.getLogger(__name__)

#: The day these prices were read.
PRICES_AS_OF = date(2026, 11, 22)
#: Batch requests cost this fraction of the listed price.
BATCH_MULTIPLIER = Decimal("0.5")

_MTOK = Decimal(1_000_000)


@dataclass(frozen=True)
class Rates:
    """USD per million tokens for each kind of token."""

    input: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal
    cache_read: Decimal
    output: Decimal


@dataclass(frozen=True)
class ModelPrice:
    """The price of one model (and its aliases)."""

    #: Canonical model id.
    model: str
    #: Other ids billed the same (undated aliases, ``-latest``).
    aliases: tuple[str, ...]
    rates: Rates
    #: Rates for every token of a request whose prompt exceeds ``long_prompt_threshold``.
    long_prompt_rates: Rates | None = None
    long_prompt_threshold: int | None = None


def _rates(inp: str, w5: str, w1: str, hit: str, out: str) -> Rates:
    return Rates(Decimal(inp), Decimal(w5), Decimal(w1), Decimal(hit), Decimal(out))


#: input / 5-min cache write / 1-h cache write / cache hit / output, USD per MTok.
ANTHROPIC_PRICES: tuple[ModelPrice, ...] = (
    ModelPrice(
        "claude-haiku-4-5-20251001",
        ("claude-haiku-4-5",),
        _rates("1.00", "1.25", "2.00", "0.10", "5.00"),
    ),
    ModelPrice(
        "claude-3-5-haiku-20241022",
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        _rates("0.80", "1.00", "1.60", "0.08", "4.00"),
    ),
    ModelPrice(
        "claude-3-haiku-20240307",
        ("claude-3-haiku",),
        _rates("0.25", "0.30", "0.50", "0.03", "1.25"),
    ),
    ModelPrice(
        "claude-haiku-5-5",
        (),
        _rates("0.10", "0.125", "0.20", "0.01", "0.50"),
        long_prompt_rates=_rates("0.50", "0.625", "1.00", "0.05", "2.50"),
        long_prompt_threshold=100_000,
    ),
)

_BY_ID: dict[str, ModelPrice] = {
    name: price for price in ANTHROPIC_PRICES for name in (price.model, *price.aliases)
}
_DATE_SUFFIX = re.compile(r"-\d{8}$")


def price_for(model: str) -> ModelPrice | None:
    """The price entry for ``model`` (exact id, alias, or a dated id of an alias), or None."""
    found = _BY_ID.get(model)
    if found is None:
        found = _BY_ID.get(_DATE_SUFFIX.sub("", model))
    return found


def anthropic_cost(model: str, usage: TokenUsage, *, batch: bool = False) -> Decimal | None:
    """USD cost of one call, or None (with a warning) when ``model`` has no listed price."""
    price = price_for(model)
    if price is None:
        log.warning("no price listed for model %r (prices as of %s): cost unknown", model, PRICES_AS_OF)
        return None
    cache_creation = usage.cache_creation_tokens or 0
    cache_read = usage.cache_read_tokens or 0
    if usage.cache_creation_5m_tokens is None and usage.cache_creation_1h_tokens is None:
        write_5m, write_1h = cache_creation, 0
    else:
        write_1h = usage.cache_creation_1h_tokens or 0
        # Anything the breakdown does not account for is billed at the default (5-minute) rate.
        write_5m = max(usage.cache_creation_5m_tokens or 0, cache_creation - write_1h)
    rates = price.rates
    prompt = usage.input_tokens + write_5m + write_1h + cache_read
    if (
        price.long_prompt_rates is not None
        and price.long_prompt_threshold is not None
        and prompt > price.long_prompt_threshold
    ):
        rates = price.long_prompt_rates
    total = (
        usage.input_tokens * rates.input
        + write_5m * rates.cache_write_5m
        + write_1h * rates.cache_write_1h
        + cache_read * rates.cache_read
        + usage.output_tokens * rates.output
    ) / _MTOK
    return total * BATCH_MULTIPLIER if batch else total

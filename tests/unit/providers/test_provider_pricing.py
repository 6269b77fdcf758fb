"""The dated Anthropic price table: exact Decimal costs for every listed model."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from airlock.providers import ANTHROPIC_PRICES, PRICES_AS_OF, anthropic_cost, price_for
from airlock.turn import TokenUsage

#: One of each counter: 1M uncached input, 1M 5-min writes, 1M 1-h writes, 1M hits, 1M output,
#: so the cost is the sum of the five listed rates.
ONE_MTOK_EACH = TokenUsage(
    input_tokens=1_000_000,
    output_tokens=1_000_000,
    cache_read_tokens=1_000_000,
    cache_creation_tokens=2_000_000,
    cache_creation_5m_tokens=1_000_000,
    cache_creation_1h_tokens=1_000_000,
)


def test_table_is_dated() -> None:
    assert date(2026, 11, 22) == PRICES_AS_OF
    assert {p.model for p in ANTHROPIC_PRICES} == {
        "claude-haiku-4-5-20251001",
        "claude-3-5-haiku-20241022",
        "claude-3-haiku-20240307",
        "claude-haiku-5-5",
    }


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # input + 5m write + 1h write + hit + output
        (
            "claude-haiku-4-5-20251001",
            Decimal("1.00") + Decimal("1.25") + Decimal("2.00") + Decimal("0.10") + 5,
        ),
        ("claude-haiku-4-5", Decimal("9.35")),
        (
            "claude-3-5-haiku-20241022",
            Decimal("0.80") + Decimal("1.00") + Decimal("1.60") + Decimal("0.08") + 4,
        ),
        ("claude-3-5-haiku-latest", Decimal("7.48")),
        (
            "claude-3-haiku-20240307",
            Decimal("0.25") + Decimal("0.30") + Decimal("0.50") + Decimal("0.03") + Decimal("1.25"),
        ),
        # the prompt here is 4M tokens: Haiku 5.5's long band for every token
        (
            "claude-haiku-5-5",
            Decimal("0.50") + Decimal("0.625") + Decimal("1.00") + Decimal("0.05") + Decimal("2.50"),
        ),
    ],
)
def test_every_counter_is_priced(model: str, expected: Decimal) -> None:
    assert anthropic_cost(model, ONE_MTOK_EACH) == expected


def test_haiku_4_5_small_call_exact() -> None:
    usage = TokenUsage(
        input_tokens=1234, output_tokens=567, cache_read_tokens=8900, cache_creation_tokens=100
    )
    # no TTL breakdown: cache writes at the 5-minute rate
    expected = (1234 * Decimal("1.00") + 100 * Decimal("1.25") + 8900 * Decimal("0.10") + 567 * 5) / 1_000_000
    assert anthropic_cost("claude-haiku-4-5-20251001", usage) == expected == Decimal("0.005084")


def test_breakdown_that_does_not_cover_the_total_bills_the_rest_at_5m() -> None:
    usage = TokenUsage(cache_creation_tokens=300, cache_creation_5m_tokens=100, cache_creation_1h_tokens=100)
    # 200 at 5m (100 reported + 100 unaccounted) + 100 at 1h
    assert anthropic_cost("claude-haiku-4-5", usage) == (200 * Decimal("1.25") + 100 * 2) / 1_000_000


def test_haiku_5_5_long_prompt_band_boundary() -> None:
    at_threshold = TokenUsage(input_tokens=60_000, cache_read_tokens=40_000, output_tokens=1_000)
    assert (
        anthropic_cost("claude-haiku-5-5", at_threshold)
        == (60_000 * Decimal("0.10") + 40_000 * Decimal("0.01") + 1_000 * Decimal("0.50")) / 1_000_000
    )
    over = TokenUsage(
        input_tokens=60_000, cache_read_tokens=40_000, cache_creation_tokens=1, output_tokens=1_000
    )
    # one token over 100K: every token (output too) at the long band
    assert (
        anthropic_cost("claude-haiku-5-5", over)
        == (
            60_000 * Decimal("0.50")
            + 40_000 * Decimal("0.05")
            + 1 * Decimal("0.625")
            + 1_000 * Decimal("2.50")
        )
        / 1_000_000
    )
    assert anthropic_cost("claude-haiku-5-5", over) == Decimal("0.034500625")


def test_dated_id_of_an_alias_and_batch() -> None:
    assert price_for("claude-haiku-5-5-20261007") is price_for("claude-haiku-5-5")
    usage = TokenUsage(input_tokens=1_000_000)
    assert anthropic_cost("claude-haiku-4-5", usage, batch=True) == Decimal("0.5")


def test_unknown_model_has_no_price(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        assert anthropic_cost("claude-sonnet-4-5", TokenUsage(input_tokens=10)) is None
    assert "claude-sonnet-4-5" in caplog.text and "2026-11-22" in caplog.text


def test_cost_is_decimal_never_float() -> None:
    cost = anthropic_cost("claude-3-haiku-20240307", TokenUsage(input_tokens=3, output_tokens=7))
    assert isinstance(cost, Decimal)
    assert cost == Decimal("0.00000950")

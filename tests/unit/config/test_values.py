"""Durations, decimals, quantities and destinations parse exactly."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.config import load_config, parse_duration, parse_quantity
from airlock.config._values import looks_like_secret_value, normalise_destination

Write = Callable[..., Path]


@pytest.mark.parametrize(
    ("text", "ms"),
    [("90s", 90_000), ("5m", 300_000), ("1h30m", 5_400_000), ("250ms", 250), ("1.5s", 1_500),
     ("2m30s", 150_000), ("1h2m3s4ms", 3_723_004), (1500, 1500), (" 10s ", 10_000)],
)  # fmt: skip
def test_durations(text: str | int, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "bad", ["", "5", "5x", "1.5", "0s", "0.0001s", "30s1m", "1m1m", "-5s", 1.5, True, 0, -3]
)
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("value", "out"), [("500m", "500m"), (1, "1"), (0.5, "0.5"), ("2Gi", "2Gi"), ("1e3", None)]
)
def test_quantities(value: object, out: str | None) -> None:
    if out is None:
        with pytest.raises(ValueError):
            parse_quantity(value)
    else:
        assert parse_quantity(value) == out


@pytest.mark.parametrize(
    ("text", "out"),
    [("API.Example.com.", "api.example.com"), ("*.example.com", "*.example.com"), ("10.0.0.5", "10.0.0.5/32"),
     ("fd00::/8", "fd00::/8"), ("192.168.0.0/16", "192.168.0.0/16")],
)  # fmt: skip
def test_destinations(text: str, out: str) -> None:
    assert normalise_destination(text) == out


@pytest.mark.parametrize("bad", ["*", "a.*.com", "10.0.0.1/8", "exa_mple.com", "-x.com", ""])
def test_bad_destinations(bad: str) -> None:
    with pytest.raises(ValueError):
        normalise_destination(bad)


def test_secret_value_heuristic() -> None:
    assert looks_like_secret_value("sk-ant-api03-xyz")
    assert looks_like_secret_value("ghp_abc")
    assert looks_like_secret_value("aB3dE5gH7jK9mN1pQ3sT5vW7")
    assert not looks_like_secret_value("anthropic-api-key")
    assert not looks_like_secret_value("MY_VERY_LONG_ENVIRONMENT_VARIABLE_NAME_2")


def test_cost_keeps_its_exact_decimal_and_duration_is_milliseconds(write: Write) -> None:
    path = write(
        """
        defaults: {max_cost: "0.10"}
        agents:
          a:
            provider: {kind: scripted, script: []}
            defaults: {max_cost: "0.0123", max_duration: 1h30m, max_turns: 3}
          b:
            provider: {kind: scripted, script: []}
            defaults: {max_duration: 2500}
        """
    )
    config = load_config(path)
    a, b = config.agent("a").spec.defaults, config.agent("b").spec.defaults
    assert a.max_cost == Decimal("0.0123") and str(a.max_cost) == "0.0123"
    assert (a.max_duration, a.max_turns) == (5_400_000, 3)
    assert str(b.max_cost) == "0.10" and b.max_duration == 2500 and b.max_turns is None
    # The wire form keeps the scale: "0.10", not 0.1.
    assert config.agent("b").spec.defaults.model_dump(mode="json")["max_cost"] == "0.10"

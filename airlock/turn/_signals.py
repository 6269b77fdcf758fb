"""Signals a running turn receives at its step boundaries: what each one does to the session.

``cancel`` ends the turn (``custom("cancelled")``, with a Log effect saying why); ``budget``
changes its limits (an object of ``max_turns``, ``max_cost``, ``max_duration_ms``, and
``model``: the model its later calls ask for, priced by the provider for that model; anything
else is ignored, and the event says why); any other type is feedback: its data, as text,
joins the last user message (the tool results the model reads next).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import JsonValue

from airlock.errors import shorten
from layer0 import ExitReason, Log, LogLevel

from ._config import ResolvedConfig
from ._events import SignalDelivered
from ._state import SessionState
from ._types import ProviderMessage, Role, TextPart

BUDGET_KEYS = ("max_turns", "max_cost", "max_duration_ms", "model")


@dataclass(frozen=True)
class SignalOutcome:
    """What one signal did: its event, the turn's end (``cancel``), the limits it changed,
    and the first message it rewrote (a checkpoint must carry it again)."""

    event: SignalDelivered
    exit: ExitReason | None = None
    overrides: dict[str, Any] | None = None
    rewrote: int | None = None


def budget_problem(data: JsonValue) -> str | None:
    """Why ``data`` is not a budget change (an object of max_turns, max_cost, max_duration_ms,
    model)."""
    if not isinstance(data, dict) or not data:
        return "a budget signal's data is an object of max_turns, max_cost, max_duration_ms, model"
    unknown = sorted(set(data) - set(BUDGET_KEYS))
    if unknown:
        return f"unknown budget key(s) {', '.join(unknown)}; valid: {', '.join(BUDGET_KEYS)}"
    for key in ("max_turns", "max_duration_ms"):
        value = data.get(key)
        if key in data and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            return f"{key} must be a positive integer"
    if "model" in data and (not isinstance(data["model"], str) or not data["model"].strip()):
        return "model must be a non-empty model name"
    if "max_cost" in data:
        try:
            cost = Decimal(str(data["max_cost"]))
        except ArithmeticError:
            return "max_cost must be a decimal amount"
        if not cost.is_finite() or cost < 0 or isinstance(data["max_cost"], bool):
            return "max_cost must be a decimal amount of at least 0"
    return None


def overridden(cfg: ResolvedConfig, overrides: dict[str, Any]) -> ResolvedConfig:
    """``cfg`` with the limits budget signals changed (``overrides``, validated on arrival)."""
    if not overrides:
        return cfg
    changes: dict[str, Any] = {}
    for key in ("max_turns", "max_duration_ms"):
        if key in overrides:
            changes[key] = int(overrides[key])
    if "max_cost" in overrides:
        changes["max_cost"] = Decimal(str(overrides["max_cost"]))
    if "model" in overrides:
        changes["model"] = str(overrides["model"])
    return dataclasses.replace(cfg, **changes)


def apply_signal(state: SessionState, signal_type: str, data: JsonValue) -> SignalOutcome:
    """Apply one signal to ``state`` (its messages, effects and overrides change in place)."""
    if signal_type == "cancel":
        detail = data if isinstance(data, str) else json.dumps(data)
        state.effects.append(
            Log(level=LogLevel.WARN, message=f"turn cancelled by a signal: {detail}", data=data)
        )
        return SignalOutcome(
            SignalDelivered(signal_type=signal_type, action="cancel", detail=detail),
            exit=ExitReason.custom("cancelled"),
        )
    if signal_type == "budget":
        problem = budget_problem(data)
        if problem is not None:
            return SignalOutcome(SignalDelivered(signal_type=signal_type, action="ignored", detail=problem))
        assert isinstance(data, dict)
        state.overrides.update(data)
        detail = json.dumps(data, sort_keys=True)
        return SignalOutcome(
            SignalDelivered(signal_type=signal_type, action="budget", detail=detail), overrides=data
        )
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    note = TextPart(text=f"[signal {signal_type}] {text}")
    last = state.messages[-1] if state.messages else None
    rewrote = None
    if last is not None and last.role is Role.USER:
        state.messages[-1] = ProviderMessage(role=Role.USER, content=[*last.content, note])
        rewrote = len(state.messages) - 1
    else:
        state.messages.append(ProviderMessage(role=Role.USER, content=[note]))
    event = SignalDelivered(signal_type=signal_type, action="feedback", detail=shorten(text, 200))
    return SignalOutcome(event, rewrote=rewrote)

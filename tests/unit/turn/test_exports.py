"""airlock.turn's public names: __all__ matches what the package exposes."""

from __future__ import annotations

import airlock.turn as turn


def test_all_names_exist_and_are_public() -> None:
    for name in turn.__all__:
        assert hasattr(turn, name), name
    public = {n for n in dir(turn) if not n.startswith("_")} - {"annotations"}
    modules = {n for n in public if type(getattr(turn, n)).__name__ == "module"}
    assert public - modules == set(turn.__all__)


def test_loop_api_is_exported() -> None:
    for name in (
        "NeuronTurn",
        "TurnLoop",
        "StepResult",
        "SessionState",
        "ToolRegistry",
        "HookRegistry",
        "tool",
    ):
        assert name in turn.__all__

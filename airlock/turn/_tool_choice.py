"""When a turn makes the model call a tool: the ``tool_choice`` (and ``parallel_tool_calls``)
of each model call, from the conversation so far."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from ._types import ProviderMessage, ToolResultPart

Choice = Literal["auto", "required"]


@dataclass(frozen=True)
class ToolChoicePolicy:
    """Which model calls must call a tool (when tools are offered); the others are ``auto``.

    Small local models tend to explain how they would do a task instead of doing it, and to
    give up (or guess the output) after a command fails. ``required`` makes them act first.
    """

    #: The turn's first model call.
    first: Choice = "auto"
    #: The call after a failed tool step (:func:`failed_step`), once: when the call it forced
    #: fails too, the model may answer (a task may be to report a failure).
    after_failure: Choice = "auto"
    #: False: at most one tool call per model reply (``parallel_tool_calls``); None: the
    #: provider's default.
    parallel: bool | None = None

    def request_extra(self, iteration: int, messages: Sequence[ProviderMessage]) -> dict[str, JsonValue]:
        """The request keys for model call ``iteration`` (from 1) after ``messages``."""
        extra: dict[str, JsonValue] = {}
        if self.parallel is not None:
            extra["parallel_tool_calls"] = self.parallel
        first = iteration == 1 and self.first == "required"
        after = (
            self.after_failure == "required"
            and failed_step(messages[-1:])
            and not failed_step(messages[-3:-2])
        )
        if first or after:
            extra["tool_choice"] = "required"
        return extra


def failed_step(messages: Sequence[ProviderMessage]) -> bool:
    """Whether the tool results in ``messages`` report a failure: an error result, or an object
    whose integer ``exit_code`` is not 0 (a command that failed, e.g. ``bash``'s)."""
    for message in messages:
        for part in message.content:
            if not isinstance(part, ToolResultPart):
                continue
            if part.is_error or _nonzero_exit(part.content):
                return True
    return False


def _nonzero_exit(content: str) -> bool:
    code = exit_code(content)
    return code is not None and code != 0


def exit_code(content: str) -> int | None:
    """The exit status a tool result reports: the integer ``exit_code`` of a JSON object
    (a command's result, e.g. ``bash``'s), else None."""
    if not content.startswith("{"):
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    code = value.get("exit_code") if isinstance(value, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None

"""FakeProvider: an in-memory ``airlock.turn.Provider`` double for loop tests.

It speaks no wire protocol (the loop only sees the Provider protocol); for tests and
demos that should exercise a real provider path use ``airlock.providers.ScriptedProvider``.
Each call consumes the next scripted item: a ProviderResponse, an exception to raise, or a
(sync or async) function of the request. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any

from pydantic import JsonValue

from airlock.turn import (
    ContentPart,
    ProviderRequest,
    ProviderResponse,
    StopReason,
    TextPart,
    TokenUsage,
    ToolUsePart,
)
from layer0 import TurnError

Responder = Callable[[ProviderRequest], ProviderResponse | Awaitable[ProviderResponse]]
ScriptItem = ProviderResponse | BaseException | Responder


class FakeProvider:
    """Plays ``script`` one item per call; raises ``TurnError.model`` when it runs out."""

    name = "fake"

    def __init__(self, script: Sequence[ScriptItem] = (), *, repeat_last: bool = False) -> None:
        self.script: list[ScriptItem] = list(script)
        self.repeat_last = repeat_last
        self.requests: list[ProviderRequest] = []
        self._next = 0

    def add(self, *items: ScriptItem) -> None:
        """Append items to the script."""
        self.script.extend(items)

    @property
    def calls(self) -> int:
        """Calls made so far."""
        return len(self.requests)

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """The next scripted response (or raise the scripted exception)."""
        self.requests.append(request)
        if self._next >= len(self.script):
            if not (self.repeat_last and self.script):
                raise TurnError.model(f"fake provider script exhausted after {len(self.script)} call(s)")
            item = self.script[-1]
        else:
            item = self.script[self._next]
            self._next += 1
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, ProviderResponse):
            return item
        result = item(request)
        if inspect.isawaitable(result):
            return await result
        return result


def text_response(
    text: str,
    *,
    stop: StopReason = StopReason.END_TURN,
    tokens_in: int = 10,
    tokens_out: int = 5,
    cost: Decimal | None = None,
    stop_detail: str | None = None,
) -> ProviderResponse:
    """A response holding ``text``."""
    content: list[ContentPart] = [TextPart(text=text)] if text else []
    return ProviderResponse(
        content=content,
        stop_reason=stop,
        usage=TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out),
        model="fake-model",
        cost=cost,
        stop_detail=stop_detail,
    )


def tool_response(
    *calls: tuple[str, str, JsonValue],
    text: str = "",
    tokens_in: int = 10,
    tokens_out: int = 5,
    cost: Decimal | None = None,
    stop: StopReason = StopReason.TOOL_USE,
) -> ProviderResponse:
    """A response asking for tool calls, each ``(id, name, input)``."""
    content: list[ContentPart] = [TextPart(text=text)] if text else []
    content += [ToolUsePart(id=i, name=n, input=inp) for i, n, inp in calls]
    return ProviderResponse(
        content=content,
        stop_reason=stop,
        usage=TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out),
        model="fake-model",
        cost=cost,
    )


def usage_of(response: ProviderResponse) -> dict[str, Any]:
    """The response's usage as a dict (for assertions)."""
    return response.usage.model_dump()

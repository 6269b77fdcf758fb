"""Tool middleware of the image's packages: code around every tool call of a turn.

A middleware sees each call before it runs (and may refuse it: the model reads the reason as
the call's error result, the tool never runs) and its result after (and may replace it).
Several wrap in the spec's order, the first outermost: its ``before`` runs first, its
``after`` last. They join the ToolRegistry's chain (:data:`ToolMiddleware`), outside its
input validation; a factory may also return such a chain function itself. The turn's own
tools (effect and memory tools) are not wrapped: they run nothing in the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from airlock.errors import SpecError, ToolError

from ._registry import ToolMiddleware, ToolNext
from ._tool import ToolContext, ToolResult

__all__ = ["CallMiddleware", "CallMiddlewareBase", "ToolCall", "as_tool_middleware"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call as a middleware sees it."""

    tool: str
    input: JsonValue
    ctx: ToolContext


@runtime_checkable
class CallMiddleware(Protocol):
    """Wraps tool calls: ``before`` may refuse one, ``after`` may replace its result."""

    async def before(self, call: ToolCall) -> str | None:
        """None: the call goes on; a string: it is refused, with this reason."""
        ...

    async def after(self, call: ToolCall, result: JsonValue | ToolResult) -> JsonValue | ToolResult:
        """The call's result as the model reads it (``result`` unchanged, or another)."""
        ...


class CallMiddlewareBase:
    """A middleware that does nothing: subclass it and override ``before`` or ``after``."""

    async def before(self, call: ToolCall) -> str | None:
        """Let every call through."""
        return None

    async def after(self, call: ToolCall, result: JsonValue | ToolResult) -> JsonValue | ToolResult:
        """Keep the result."""
        return result


def as_tool_middleware(found: object, where: str) -> ToolMiddleware:
    """What a middleware factory returned, as a link of the registry's chain.

    Raises:
        SpecError: neither a :class:`CallMiddleware` nor a chain function.
    """
    if isinstance(found, CallMiddleware):
        return _chained(found)
    if callable(found):
        return found  # async (name, input, ctx, next): checked by use
    raise SpecError(f"{where}: its factory returned a {type(found).__name__}, not a tool middleware")


def _chained(middleware: CallMiddleware) -> ToolMiddleware:
    async def link(name: str, input: JsonValue, ctx: ToolContext, nxt: ToolNext) -> JsonValue | ToolResult:
        call = ToolCall(tool=name, input=input, ctx=ctx)
        reason = await middleware.before(call)
        if reason is not None:
            raise ToolError("permission_denied", f"refused by tool middleware: {reason}")
        return await middleware.after(call, await nxt(name, input, ctx))

    return link

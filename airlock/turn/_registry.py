"""ToolRegistry: named tools behind an axum-style middleware chain, with input validation.

``execute`` never raises for a tool's own failure: unknown tools, schema violations,
``ToolError`` kinds (including ``model_retry``) and unexpected exceptions all become an
error result the model can read. Only cancellation propagates. A tool returning a
:class:`ToolResult` declares effects with its result (:attr:`ToolOutcome.effects`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from airlock.errors import SpecError, ToolError
from airlock.spec import TOOL_RISKS
from layer0 import CustomEffect

from ._config import ToolSchema
from ._tool import MAX_TOOL_EFFECTS, ToolContext, ToolDyn, ToolResult

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger(__name__)

#: How a schema violation reads, alone and as an ``invalid_input`` ToolError's outcome.
_INVALID_MESSAGE = "invalid input for tool"
_INVALID_PREFIX = f"invalid_input: {_INVALID_MESSAGE} "

#: The rest of the chain, as a middleware sees it.
ToolNext = Callable[[str, JsonValue, ToolContext], Awaitable[JsonValue | ToolResult]]
#: ``async def mw(name, input, ctx, next) -> JsonValue`` wrapping every tool call (axum ``from_fn``).
ToolMiddleware = Callable[[str, JsonValue, ToolContext, ToolNext], Awaitable[JsonValue | ToolResult]]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call produced: the text backfilled into the conversation, and the custom
    effects it declared (a :class:`ToolResult`'s)."""

    content: str
    is_error: bool = False
    effects: tuple[CustomEffect, ...] = ()


def result_text(value: JsonValue) -> str:
    """A tool's return value as result text: strings as-is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _make_validator(name: str, schema: dict[str, Any]) -> Validator:
    from jsonschema import Draft202012Validator  # lazy: a runner serves health without jsonschema
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise SpecError(f"tool {name!r} has an invalid input schema: {e.message}") from e
    return cls(schema)


class ToolRegistry:
    """Tools by name plus the middleware every call goes through, in registration order.

    Args:
        tools: tools to register.
        middleware: middleware to register (the first registered is the outermost).

    Raises:
        SpecError: a tool name registered twice, or a tool whose input schema is invalid.
    """

    def __init__(self, tools: Iterable[ToolDyn] = (), middleware: Iterable[ToolMiddleware] = ()) -> None:
        self._tools: dict[str, ToolDyn] = {}
        self._validators: dict[str, Validator] = {}
        self._middleware: list[ToolMiddleware] = []
        for t in tools:
            self.register(t)
        for mw in middleware:
            self.use(mw)

    def register(self, tool: ToolDyn) -> None:
        """Add a tool.

        Raises:
            SpecError: the name is taken or the schema is invalid.
        """
        if tool.name in self._tools:
            raise SpecError(f"tool {tool.name!r} is registered twice")
        self._validators[tool.name] = _make_validator(tool.name, tool.input_schema)
        self._tools[tool.name] = tool

    def use(self, middleware: ToolMiddleware) -> None:
        """Append a middleware; it runs inside every middleware registered before it."""
        self._middleware.append(middleware)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def get(self, name: str) -> ToolDyn | None:
        """The tool called ``name``, if registered."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def risks(self, name: str) -> tuple[str, ...]:
        """The risk classes of tool ``name``: what the tool declares (a ``risks`` attribute),
        else the built-in tools' table (``airlock.spec.TOOL_RISKS``); none for others."""
        declared = getattr(self._tools.get(name), "risks", None)
        if declared is not None:
            return tuple(declared)
        return TOOL_RISKS.get(name, ())

    def schemas(self, only: Sequence[str] | None = None) -> list[ToolSchema]:
        """The tools as offered to the model; ``only`` keeps just those names."""
        return [
            ToolSchema(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in self._tools.values()
            if only is None or t.name in only
        ]

    def validation_error(self, name: str, input: JsonValue) -> str | None:
        """Why ``input`` does not match tool ``name``'s schema, or None when it does."""
        validator = self._validators[name]
        errors = sorted(validator.iter_errors(input), key=lambda e: list(e.path))
        if not errors:
            return None
        lines = []
        for err in errors[:5]:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            lines.append(f"{where}: {err.message}")
        more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
        return f"{_INVALID_MESSAGE} {name!r}: " + "; ".join(lines) + more

    async def call(self, name: str, input: JsonValue, ctx: ToolContext) -> JsonValue | ToolResult:
        """Run ``name`` through the middleware chain; the input is validated just before the tool.

        Raises:
            ToolError: ``not_found``, ``invalid_input``, or whatever the tool raises.
        """

        async def endpoint(name: str, input: JsonValue, ctx: ToolContext) -> JsonValue | ToolResult:
            tool = self._tools.get(name)
            if tool is None:
                raise ToolError.not_found(self.unknown_tool_message(name, self.names()))
            problem = self.validation_error(name, input)
            if problem is not None:
                raise ToolError.invalid_input(problem)
            return await tool.call(input, ctx)

        handler: ToolNext = endpoint
        for mw in reversed(self._middleware):
            handler = _bind(mw, handler)
        return await handler(name, input, ctx)

    async def execute(
        self, name: str, input: JsonValue, ctx: ToolContext, *, allowed: Collection[str] | None = None
    ) -> ToolOutcome:
        """Run a tool and turn every failure into an error outcome (never raises but on cancel).

        ``allowed`` restricts which registered tools may run (others count as unknown).
        """
        if name not in self._tools or (allowed is not None and name not in allowed):
            offered = [n for n in self.names() if allowed is None or n in allowed]
            return ToolOutcome(self.unknown_tool_message(name, offered), is_error=True)
        try:
            value = await self.call(name, input, ctx)
        except ToolError as e:
            if e.kind == "model_retry":
                return ToolOutcome(e.message, is_error=True)
            return ToolOutcome(f"{e.kind}: {e.message}", is_error=True)
        except Exception as e:
            log.exception("tool %s raised an unexpected error", name)
            return ToolOutcome(f"tool {name!r} failed unexpectedly: {type(e).__name__}: {e}", is_error=True)
        if not isinstance(value, ToolResult):
            return ToolOutcome(result_text(value))
        if len(value.effects) > MAX_TOOL_EFFECTS:
            return ToolOutcome(
                f"tool {name!r} declared {len(value.effects)} effects in one call, more than the "
                f"{MAX_TOOL_EFFECTS} allowed; none was declared",
                is_error=True,
            )
        return ToolOutcome(result_text(value.content), effects=tuple(value.effects))

    @staticmethod
    def refused(output: str) -> bool:
        """Whether a failed call's output says it was refused before running: an unknown tool,
        or input outside the tool's schema (the messages :meth:`execute` writes)."""
        return output.startswith(("unknown tool ", "not_found: unknown tool ", _INVALID_PREFIX))

    @staticmethod
    def unknown_tool_message(name: str, available: Sequence[str]) -> str:
        """The error text for a call to a tool that is not offered."""
        listed = ", ".join(available) if available else "(none)"
        return f"unknown tool {name!r}; available tools: {listed}"


def _bind(mw: ToolMiddleware, nxt: ToolNext) -> ToolNext:
    async def handler(name: str, input: JsonValue, ctx: ToolContext) -> JsonValue | ToolResult:
        return await mw(name, input, ctx, nxt)

    return handler

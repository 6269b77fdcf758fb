"""Agent extensions for tests: a provider, a hook, a context strategy, a tool middleware and a
turn, each registered by entry point (pyproject.toml)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from airlock.spec import AgentSpec, ContextSpec, ProviderSpec
from airlock.turn import (
    CallMiddlewareBase,
    CustomTurnParts,
    Provider,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    StopReason,
    TextPart,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolResultPart,
    ToolUsePart,
    estimate_tokens,
)
from layer0 import (
    ExitReason,
    HookAction,
    HookContext,
    HookContinue,
    HookPoint,
    TurnInput,
    TurnMetadata,
    TurnOutput,
)


class EchoProvider:
    """Calls ``options.tool`` with ``options.input`` once when it is offered, then answers
    ``options.prefix`` + the last tool result (or the user's text)."""

    name = "echo-llm"

    def __init__(self, spec: ProviderSpec) -> None:
        self.options = dict(spec.options)

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        parts = [p for m in request.messages for p in m.content]
        results = [p for p in parts if isinstance(p, ToolResultPart)]
        tool = self.options.get("tool")
        if tool and not results and any(t.name == tool for t in request.tools):
            use = ToolUsePart(id="echo-1", name=str(tool), input=self.options.get("input", {}))
            return ProviderResponse(content=[use], stop_reason=StopReason.TOOL_USE)
        texts = [p.text for p in parts if isinstance(p, TextPart)]
        last = str(results[-1].content) if results else (texts[-1] if texts else "")
        text = f"{self.options.get('prefix', 'echo: ')}{last}"
        return ProviderResponse(content=[TextPart(text=text)], stop_reason=StopReason.END_TURN)


class AuditHook:
    """Lets every tool call through (it only has to load and be a hook)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def points(self) -> Sequence[HookPoint]:
        return [HookPoint.POST_TOOL_USE]

    async def on_event(self, ctx: HookContext) -> HookAction:
        return HookContinue()


class KeepAll:
    """Never compacts."""

    def __init__(self, spec: ContextSpec, provider: Provider) -> None:
        self.spec = spec

    def token_estimate(self, messages: Sequence[ProviderMessage]) -> int:
        return estimate_tokens(messages)

    def should_compact(self, messages: Sequence[ProviderMessage], limit: int) -> bool:
        return False

    async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage]:
        return messages


class Tagger(CallMiddlewareBase):
    """Refuses the tools ``options.deny`` lists; wraps every other result as ``[tag] result``."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.tag = str(options.get("tag", "mw"))
        self.deny = list(options.get("deny", []))

    async def before(self, call: ToolCall) -> str | None:
        return f"{call.tool} is denied" if call.tool in self.deny else None

    async def after(self, call: ToolCall, result: JsonValue | ToolResult) -> JsonValue | ToolResult:
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return f"[{self.tag}] {text}"


class OneShotTurn:
    """One model call, then one call of ``options.tool`` with ``options.input``: answers both."""

    def __init__(self, spec: AgentSpec, parts: CustomTurnParts) -> None:
        self.spec = spec
        self.parts = parts

    async def execute(self, input: TurnInput) -> TurnOutput:
        text = input.message.as_text() or ""
        request = ProviderRequest(messages=[ProviderMessage(role="user", content=[TextPart(text=text)])])
        reply = await self.parts.provider.complete(request)
        said = " ".join(p.text for p in reply.content if isinstance(p, TextPart))
        tool = str(self.parts.options.get("tool", "calculator"))
        outcome = await self.parts.tools.execute(
            tool, self.parts.options.get("input", {}), ToolContext("one-shot-1", agent=self.spec.name)
        )
        return TurnOutput(
            message=f"{said} | {outcome.content}",
            exit_reason=ExitReason.complete(),
            metadata=TurnMetadata.empty(),
        )

"""Context strategies: keep the conversation within the model's window (client-side compaction).

Every strategy keeps each ``tool_use`` together with its ``tool_result``: a compacted
conversation never starts with a tool result whose call was cut away. A strategy that calls
a model (Summarization) returns a :class:`Compaction` carrying those calls, so their tokens
and cost count in the turn's.

They work beside a provider's server-side compaction: the provider ignores what precedes its
latest compaction part, so the token estimate starts there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from layer0 import Scope, StateReader

from ._provider import Provider
from ._types import (
    SUMMARY_PREFIX,
    CompactionPart,
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)

log = logging.getLogger(__name__)

#: Rough token cost charged for an image part.
IMAGE_TOKENS = 1_000


def since_last_compaction(messages: Sequence[ProviderMessage]) -> Sequence[ProviderMessage]:
    """The messages from the last one holding a provider's compaction part on (all of them
    when none does): what the provider actually reads."""
    for i in range(len(messages) - 1, -1, -1):
        if any(isinstance(p, CompactionPart) for p in messages[i].content):
            return messages[i:]
    return messages


def estimate_tokens(messages: Sequence[ProviderMessage]) -> int:
    """A cheap token estimate of what the provider reads (from its latest compaction on):
    about four characters per token, plus a little per message."""
    chars = 0
    images = 0
    for msg in since_last_compaction(messages):
        chars += 16
        for part in msg.content:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, ToolResultPart):
                chars += len(part.content) + 16
            elif isinstance(part, ToolUsePart):
                chars += len(part.name) + len(json.dumps(part.input)) + 16
            elif isinstance(part, CompactionPart):
                chars += len(part.summary or "")
            elif isinstance(part, ImagePart):
                images += 1
    return chars // 4 + images * IMAGE_TOKENS


@dataclass(frozen=True)
class Compaction:
    """What a compaction produced: the shorter conversation and the model calls it made
    (the turn counts their tokens and cost)."""

    messages: list[ProviderMessage]
    calls: tuple[ProviderResponse, ...] = ()


def as_compaction(result: list[ProviderMessage] | Compaction) -> Compaction:
    """A strategy's ``compact`` result as a :class:`Compaction` (a plain list made no call)."""
    return result if isinstance(result, Compaction) else Compaction(messages=result)


@runtime_checkable
class ContextStrategy(Protocol):
    """Decides when and how to compact the conversation between model calls."""

    def token_estimate(self, messages: Sequence[ProviderMessage]) -> int:
        """Estimated tokens of ``messages``."""
        ...

    def should_compact(self, messages: Sequence[ProviderMessage], limit: int) -> bool:
        """Whether ``messages`` need compacting to fit ``limit`` tokens."""
        ...

    async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage] | Compaction:
        """A shorter conversation (never splitting a tool_use from its tool_result): a list,
        or a :class:`Compaction` when model calls were made to write it."""
        ...


class NoCompaction:
    """Never compacts (the provider may still truncate on its side)."""

    def token_estimate(self, messages: Sequence[ProviderMessage]) -> int:
        """See ``estimate_tokens``."""
        return estimate_tokens(messages)

    def should_compact(self, messages: Sequence[ProviderMessage], limit: int) -> bool:
        """Never."""
        return False

    async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage]:
        """The messages unchanged."""
        return messages


def _has_tool_result(msg: ProviderMessage) -> bool:
    return any(isinstance(p, ToolResultPart) for p in msg.content)


def _is_plain_user(msg: ProviderMessage) -> bool:
    return msg.role is Role.USER and not _has_tool_result(msg)


def _cut_points(messages: Sequence[ProviderMessage], start_role: Role) -> list[int]:
    """Indexes ``i > 0`` where ``messages[i:]`` can stand alone and begins with ``start_role``.

    A valid start never holds a tool_result (its tool_use would be left behind); an
    assistant start is fine because its tool_results follow it.
    """
    points = []
    for i in range(1, len(messages)):
        msg = messages[i]
        if msg.role is not start_role:
            continue
        if start_role is Role.USER and not _is_plain_user(msg):
            continue
        points.append(i)
    return points


class SlidingWindow:
    """Keeps the last ``keep_last`` messages (fewer if still over the token limit).

    The first user message (the task) is kept in front when it is plain text, in which case
    the window starts at an assistant message so roles keep alternating; otherwise the
    window starts at a plain user message. Tool pairs are never split.

    Args:
        keep_last: most messages kept after the first one.
        max_tokens: compaction also triggers, and the window shrinks further, above this.
    """

    def __init__(self, keep_last: int = 20, max_tokens: int | None = None) -> None:
        if keep_last < 1:
            raise ValueError("keep_last must be at least 1")
        self.keep_last = keep_last
        self.max_tokens = max_tokens

    def token_estimate(self, messages: Sequence[ProviderMessage]) -> int:
        """See ``estimate_tokens``."""
        return estimate_tokens(messages)

    def should_compact(self, messages: Sequence[ProviderMessage], limit: int) -> bool:
        """Over ``keep_last + 1`` messages, or over the token limit."""
        if len(messages) > self.keep_last + 1:
            return True
        budget = min(limit, self.max_tokens) if self.max_tokens else limit
        return len(messages) > 2 and estimate_tokens(messages) > budget

    async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage]:
        """Drop the oldest messages at a safe boundary (unchanged when there is none)."""
        return self.window(messages)

    def window(self, messages: list[ProviderMessage], limit: int | None = None) -> list[ProviderMessage]:
        """The compacted conversation (synchronous core of ``compact``)."""
        keep_first = bool(messages) and _is_plain_user(messages[0])
        start_role = Role.ASSISTANT if keep_first else Role.USER
        points = _cut_points(messages, start_role)
        if not points:
            return messages
        budget = self.max_tokens if limit is None else limit
        head = messages[:1] if keep_first else []
        chosen: int | None = None
        for i in points:
            tail = messages[i:]
            if len(tail) > self.keep_last:
                continue
            chosen = i
            if budget is None or estimate_tokens(head + tail) <= budget:
                break
        if chosen is None:
            chosen = points[-1]
        result = head + messages[chosen:]
        if len(result) < len(messages):
            log.debug("sliding window dropped %d messages", len(messages) - len(result))
        return result


SUMMARY_PROMPT = (
    "Summarize the conversation below for an assistant that will continue it. Keep every fact, "
    "decision, file name, tool result and open question it will need; be concise.\n\n"
)


def render_transcript(messages: Sequence[ProviderMessage]) -> str:
    """The messages as plain text, for a summarizer."""
    lines = []
    for msg in messages:
        for part in msg.content:
            if isinstance(part, TextPart):
                lines.append(f"{msg.role.value}: {part.text}")
            elif isinstance(part, ToolUsePart):
                lines.append(f"{msg.role.value} called {part.name}({json.dumps(part.input)})")
            elif isinstance(part, ToolResultPart):
                flag = " (error)" if part.is_error else ""
                lines.append(f"tool result{flag}: {part.content}")
            elif isinstance(part, CompactionPart):
                lines.append(f"summary of the earlier conversation: {part.summary or '(none)'}")
            else:
                lines.append(f"{msg.role.value}: [image]")
    return "\n".join(lines)


class Summarization:
    """Replaces the older part of the conversation with one summary message written by a provider.

    The newest ``keep_last`` messages (at most) stay verbatim, starting at an assistant message
    so the summary (a user message) and the rest alternate. Tool pairs are never split.

    Args:
        provider: the model that writes the summary.
        keep_last: messages kept verbatim.
        max_tokens: compaction triggers above this estimate.
        model: model override for the summary call.
        summary_max_tokens: output budget of the summary call.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        keep_last: int = 10,
        max_tokens: int | None = None,
        model: str | None = None,
        summary_max_tokens: int = 1024,
    ) -> None:
        self.provider = provider
        self.keep_last = keep_last
        self.max_tokens = max_tokens
        self.model = model
        self.summary_max_tokens = summary_max_tokens

    def token_estimate(self, messages: Sequence[ProviderMessage]) -> int:
        """See ``estimate_tokens``."""
        return estimate_tokens(messages)

    def should_compact(self, messages: Sequence[ProviderMessage], limit: int) -> bool:
        """Over the token limit, with something old enough to summarize."""
        budget = min(limit, self.max_tokens) if self.max_tokens else limit
        return len(messages) > self.keep_last and estimate_tokens(messages) > budget

    async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage] | Compaction:
        """Summarize ``messages`` before a safe cut point into one user message (with the
        summary call, whose usage and cost the turn counts); unchanged when there is no cut.

        Raises:
            layer0.TurnError: the summary call failed (the loop does not retry).
        """
        points = [i for i in _cut_points(messages, Role.ASSISTANT) if len(messages) - i <= self.keep_last]
        if not points:
            return messages
        cut = points[0]
        old, tail = messages[:cut], messages[cut:]
        request = ProviderRequest(
            model=self.model,
            messages=[
                ProviderMessage(
                    role=Role.USER, content=[TextPart(text=SUMMARY_PROMPT + render_transcript(old))]
                )
            ],
            max_tokens=self.summary_max_tokens,
        )
        response = await self.provider.complete(request)
        summary = ProviderMessage(role=Role.USER, content=[TextPart(text=SUMMARY_PREFIX + response.text())])
        log.debug("summarized %d messages into one", len(old))
        return Compaction(messages=[summary, *tail], calls=(response,))


class Composite:
    """Applies several strategies in order, each only while it still finds compaction needed."""

    def __init__(self, strategies: Sequence[ContextStrategy], limit: int) -> None:
        self.strategies = list(strategies)
        self.limit = limit

    def token_estimate(self, messages: Sequence[ProviderMessage]) -> int:
        """See ``estimate_tokens``."""
        return estimate_tokens(messages)

    def should_compact(self, messages: Sequence[ProviderMessage], limit: int) -> bool:
        """When any strategy would compact."""
        return any(s.should_compact(messages, limit) for s in self.strategies)

    async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage] | Compaction:
        """Each strategy in turn, while compaction is still needed (with every model call made)."""
        calls: list[ProviderResponse] = []
        for strategy in self.strategies:
            if strategy.should_compact(messages, self.limit):
                done = as_compaction(await strategy.compact(messages))
                messages, calls = done.messages, [*calls, *done.calls]
        return Compaction(messages=messages, calls=tuple(calls)) if calls else messages


#: Where the controller puts a turn's causal cone in its read-only state snapshot
#: (``Scope.custom(CONE_SCOPE)``, key ``CONE_KEY``: ``{"records": [...], "total": n}``).
CONE_SCOPE = "causal_cone"
CONE_KEY = "cone"
#: Characters of one record shown in the projected context.
CONE_RECORD_CHARS = 600


def _summary(record: dict[str, Any]) -> str:
    """One turn record (its JSON) as a line of context."""
    content = record.get("content")
    kind = str(record.get("kind", "?"))
    text: str
    if isinstance(content, dict) and kind == "input":
        message = content.get("message")
        text = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)
    elif isinstance(content, dict) and kind == "model_response":
        pieces = []
        for part in content.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "text":
                pieces.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") == "tool_use":
                pieces.append(
                    f"calls {part.get('name')}({json.dumps(part.get('input'), ensure_ascii=False)})"
                )
        text = " ".join(pieces)
    elif isinstance(content, dict) and kind == "tool_call":
        args = json.dumps(content.get("input"), ensure_ascii=False)
        failed = " (failed)" if content.get("is_error") else ""
        text = f"{content.get('tool')}({args}){failed} -> {content.get('output', '')}"
    else:
        text = json.dumps(content, ensure_ascii=False)
    if len(text) > CONE_RECORD_CHARS:
        text = text[: CONE_RECORD_CHARS - 1] + "…"
    return f"- [{record.get('agent', '?')}] {str(record.get('type', '?')).upper()} {kind}: {text}"


class CausalCone(NoCompaction):
    """Gives a turn its causal past instead of the whole shared history: the records of its
    job tree that its input transitively depends on, linearized, before its input message.

    The controller computes the cone (it holds the weave; the sandbox only receives the cone)
    and hands it over in the state snapshot; a turn without one (a submitted job, or a
    runner used directly) keeps its usual history. Later steps keep every message.
    """

    name = "causal_cone"

    async def project(self, reader: StateReader | None) -> tuple[list[TextPart], int, int] | None:
        """The cone as context parts, its size and the weave's size; None without a cone."""
        if reader is None:
            return None
        raw = await reader.read(Scope.custom(CONE_SCOPE), CONE_KEY)
        if not isinstance(raw, dict) or not isinstance(raw.get("records"), list):
            return None
        records = [r for r in raw["records"] if isinstance(r, dict)]
        total = raw.get("total")
        total = total if isinstance(total, int) and total >= len(records) else len(records)
        if not records:
            return None
        lines = "\n".join(_summary(r) for r in records)
        header = (
            f"Context: the {len(records)} record(s) of this job's history that your task depends on "
            f"(of {total} in all), oldest first:\n"
        )
        return [TextPart(text=header + lines)], len(records), total

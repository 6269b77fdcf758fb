"""NeuronTurn's internal lingua franca: flat provider messages, not layer0 and not vendor types."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from layer0 import (
    Base64Source,
    ContentBlock,
    CustomBlock,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)

from ._config import ToolSchema

log = logging.getLogger(__name__)


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """Text."""

    type: Literal["text"] = "text"
    text: str


class ToolUsePart(_Part):
    """The model asks for a tool call."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: JsonValue


class ToolResultPart(_Part):
    """A tool's result, matched to its tool_use by id."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


class ImagePart(_Part):
    """An image: base64 data or a URL."""

    type: Literal["image"] = "image"
    source_type: Literal["base64", "url"]
    data: str
    media_type: str


#: Leads a summary of the conversation before it, as text a model reads.
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


class CompactionPart(_Part):
    """The provider's summary of the conversation before it (server-side compaction).

    Kept in the history: the provider that wrote it receives ``block`` back exactly as it
    returned it (and ignores what precedes it); any other provider reads ``summary`` as text.
    """

    type: Literal["compaction"] = "compaction"
    #: The summary text (None when the provider's compaction produced none).
    summary: str | None = None
    #: The provider's block, verbatim (Anthropic: ``{"type": "compaction", "content", …}``).
    block: dict[str, JsonValue]

    def as_text(self) -> str:
        """The summary as text, for a provider that cannot take the block back."""
        return SUMMARY_PREFIX + (self.summary or "")


#: One part of a provider message (no custom variant: custom blocks become JSON text).
ContentPart = Annotated[
    TextPart | ToolUsePart | ToolResultPart | ImagePart | CompactionPart, Field(discriminator="type")
]


class Role(StrEnum):
    """Who speaks."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


class ProviderMessage(BaseModel):
    """A flat message: a role and a list of parts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    content: list[ContentPart]


class ProviderRequest(BaseModel):
    """One model call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    messages: list[ProviderMessage]
    tools: list[ToolSchema] = Field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    system: str | None = None
    #: Provider-specific passthrough (TurnInput.metadata is forwarded under "metadata").
    extra: dict[str, Any] = Field(default_factory=dict)


class StopReason(StrEnum):
    """Why the model stopped, mapped explicitly from each vendor's values."""

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    PAUSE_TURN = "pause_turn"
    REFUSAL = "refusal"
    CONTEXT_WINDOW_EXCEEDED = "model_context_window_exceeded"
    CONTENT_FILTER = "content_filter"
    #: The provider compacted the context server-side and paused: the turn goes on.
    COMPACTION = "compaction"


class TokenUsage(BaseModel):
    """Token counters of one call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    #: Breakdown of ``cache_creation_tokens`` by cache TTL, when the provider reports it.
    cache_creation_5m_tokens: int | None = None
    cache_creation_1h_tokens: int | None = None


class ProviderCompaction(BaseModel):
    """The provider compacted the context server-side during a call (its ``compaction`` part
    is in the response); the context's size around it, in tokens, when the provider says."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens_before: int | None = None
    tokens_after: int | None = None


class ProviderResponse(BaseModel):
    """What a provider returns for one call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: list[ContentPart]
    stop_reason: StopReason
    usage: TokenUsage = Field(default_factory=TokenUsage)
    #: The model actually used.
    model: str = ""
    #: USD; None when the provider cannot price the model.
    cost: Decimal | None = None
    #: Was the output cut by the ``max_tokens`` limit (stop reason ``max_tokens``)? Every
    #: provider sets it; None only in a response built without one (see :func:`is_truncated`).
    truncated: bool | None = None
    #: Refusal or filter explanation, when the provider gives one.
    stop_detail: str | None = None
    #: Why each earlier attempt of this call failed, when the provider (or its SDK) retried
    #: it (``"HTTP 529"``, ``"no response"``); empty when the first attempt answered.
    retries: list[str] = Field(default_factory=list)
    #: Set when the provider compacted the context server-side during this call.
    compaction: ProviderCompaction | None = None

    def is_truncated(self) -> bool:
        """``truncated``, or (unset) whether the stop reason is ``max_tokens``."""
        return self.stop_reason is StopReason.MAX_TOKENS if self.truncated is None else self.truncated

    def tool_uses(self) -> list[ToolUsePart]:
        """The tool calls asked for, in order."""
        return [p for p in self.content if isinstance(p, ToolUsePart)]

    def text(self) -> str:
        """All text parts joined."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


#: ``CustomBlock.content_type`` of a provider's compaction block as a layer0 block.
COMPACTION_CONTENT_TYPE = "compaction"


def block_to_part(block: ContentBlock) -> ContentPart:
    """layer0 block → internal part (a compaction block made by :func:`part_to_block` becomes
    its part again; other custom blocks become JSON text, with a warning)."""
    if isinstance(block, TextBlock):
        return TextPart(text=block.text)
    if isinstance(block, ToolUseBlock):
        return ToolUsePart(id=block.id, name=block.name, input=block.input)
    if isinstance(block, ToolResultBlock):
        return ToolResultPart(tool_use_id=block.tool_use_id, content=block.content, is_error=block.is_error)
    if isinstance(block, ImageBlock):
        src = block.source
        if isinstance(src, Base64Source):
            return ImagePart(source_type="base64", data=src.data, media_type=block.media_type)
        return ImagePart(source_type="url", data=src.url, media_type=block.media_type)
    assert isinstance(block, CustomBlock)
    if block.content_type == COMPACTION_CONTENT_TYPE and isinstance(block.data, dict):
        try:
            return CompactionPart.model_validate(block.data)
        except ValidationError:
            pass  # not one of ours: shown as JSON text like any custom block
    log.warning("custom content block %r sent to the model as JSON text", block.content_type)
    return TextPart(text=json.dumps({"content_type": block.content_type, "data": block.data}, sort_keys=True))


def part_to_block(part: ContentPart) -> ContentBlock:
    """Internal part → layer0 block (lossless for every part kind; a compaction part becomes
    a custom block of type :data:`COMPACTION_CONTENT_TYPE` holding it)."""
    if isinstance(part, TextPart):
        return TextBlock(text=part.text)
    if isinstance(part, ToolUsePart):
        return ToolUseBlock(id=part.id, name=part.name, input=part.input)
    if isinstance(part, ToolResultPart):
        return ToolResultBlock(tool_use_id=part.tool_use_id, content=part.content, is_error=part.is_error)
    if isinstance(part, CompactionPart):
        return CustomBlock(content_type=COMPACTION_CONTENT_TYPE, data=part.model_dump(mode="json"))
    source = Base64Source(data=part.data) if part.source_type == "base64" else UrlSource(url=part.data)
    return ImageBlock(source=source, media_type=part.media_type)

"""Content: what crosses every boundary: plain text or a list of typed blocks."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, RootModel

from ._wire import Json, WireModel


class Base64Source(WireModel):
    """Image bytes, base64-encoded."""

    type: Literal["base64"] = "base64"
    data: str


class UrlSource(WireModel):
    """An image reachable at a URL."""

    type: Literal["url"] = "url"
    url: str


#: Where an image's bytes come from (``"type"``-tagged).
ImageSource = Annotated[Base64Source | UrlSource, Field(discriminator="type")]


class TextBlock(WireModel):
    """A run of text."""

    type: Literal["text"] = "text"
    text: str


class ImageBlock(WireModel):
    """An image with its media type (e.g. ``image/png``)."""

    type: Literal["image"] = "image"
    source: ImageSource
    media_type: str


class ToolUseBlock(WireModel):
    """The model asks for a tool call."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: Json


class ToolResultBlock(WireModel):
    """The result of a tool call, matched to its ``tool_use`` by id."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool


class CustomBlock(WireModel):
    """Escape hatch for content types layer0 does not name yet."""

    type: Literal["custom"] = "custom"
    content_type: str
    data: Json


#: One typed block of content (``"type"``-tagged).
ContentBlock = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | CustomBlock,
    Field(discriminator="type"),
]


class Content(RootModel[str | list[ContentBlock]]):
    """Plain text (a bare JSON string) or a list of blocks (a JSON array).

    ``Content("hi")`` and ``Content.text("hi")`` build text; ``Content([TextBlock(text="hi")])``
    builds blocks.
    """

    model_config = ConfigDict(frozen=True)

    @classmethod
    def text(cls, text: str) -> Content:
        """Content holding plain text."""
        return cls(text)

    @classmethod
    def blocks(cls, blocks: list[ContentBlock]) -> Content:
        """Content holding a list of blocks."""
        return cls(list(blocks))

    @property
    def is_text(self) -> bool:
        """True when this is plain text rather than blocks."""
        return isinstance(self.root, str)

    def as_blocks(self) -> list[ContentBlock]:
        """The content as blocks (plain text becomes one text block; empty text none)."""
        if isinstance(self.root, str):
            return [TextBlock(text=self.root)] if self.root else []
        return list(self.root)

    def as_text(self) -> str | None:
        """The text, or the first text block's text; None when there is no text block."""
        if isinstance(self.root, str):
            return self.root
        for block in self.root:
            if isinstance(block, TextBlock):
                return block.text
        return None

    def joined_text(self, separator: str = "\n") -> str:
        """All text blocks joined (custom blocks as JSON); for display and logs."""
        if isinstance(self.root, str):
            return self.root
        parts: list[str] = []
        for block in self.root:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, CustomBlock):
                parts.append(json.dumps(block.data, sort_keys=True))
        return separator.join(parts)

"""An MCP tool result as the value a ``ToolDyn`` returns (or the ``ToolError`` it raises).

- ``isError``: a ``ToolError`` (``execution_failed``) whose message is the server's text.
- ``structuredContent``: that JSON value is the result (by the MCP spec the text blocks
  beside it are its serialization for older clients); with non-text blocks too, both:
  ``{"structured_content": …, "content": "<the blocks as text>"}``.
- Otherwise the content blocks as text, one after the other: text as-is, an image or audio
  block as a short note (``[image image/png, 1234 bytes]``: the result is text), a resource
  link as its URI, an embedded text resource as its text, a binary one as a note.

The server is untrusted: the result is cut to :data:`MAX_RESULT_BYTES`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from airlock.errors import ToolError

from ._base import cap_text

if TYPE_CHECKING:
    from mcp_types import CallToolResult

__all__ = ["MAX_RESULT_BYTES", "render_content", "result_value"]

#: The most bytes of a result (as UTF-8 text, or compact JSON) kept.
MAX_RESULT_BYTES = 128 * 1024


def _size(base64: str) -> int:
    """Bytes a base64 text decodes to."""
    return len(base64) * 3 // 4 - base64[-2:].count("=")


def _block_text(block: Any) -> tuple[str, bool]:
    """One content block as text, and whether it was a text block."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text), True
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {_size(block.data)} bytes]", False
    if kind == "resource_link":
        name = f" ({block.name})" if getattr(block, "name", None) else ""
        return f"[resource link {block.uri}{name}]", False
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {resource.uri}]\n{text}", False
        mime = getattr(resource, "mime_type", None) or "binary"
        return f"[resource {resource.uri}, {mime}, {_size(resource.blob)} bytes]", False
    return f"[{kind or 'unknown'} content]", False


def render_content(blocks: list[Any]) -> tuple[str, bool]:
    """The blocks as one text (newline-separated), and whether every block was text."""
    parts = [_block_text(block) for block in blocks]
    return "\n".join(text for text, _ in parts), all(is_text for _, is_text in parts)


def _capped(text: str) -> str:
    return cap_text(text.encode("utf-8", "replace"), MAX_RESULT_BYTES)


def result_value(tool: str, result: CallToolResult) -> JsonValue:
    """The value of ``tool``'s (its namespaced name) result; see the module docstring.

    Raises:
        ToolError: ``execution_failed`` with the server's text when the result is an error.
    """
    text, only_text = render_content(result.content)
    if result.is_error:
        raise ToolError.execution_failed(
            _capped(text.strip() or f"{tool} failed (the server gave no message)")
        )
    structured = result.structured_content
    if structured is None:
        return _capped(text)
    value: JsonValue = structured if only_text else {"structured_content": structured, "content": text}
    encoded = json.dumps(value, ensure_ascii=False)
    if len(encoded.encode("utf-8")) > MAX_RESULT_BYTES:
        return _capped(encoded)
    return value

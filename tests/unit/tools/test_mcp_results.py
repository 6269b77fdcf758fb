"""How an MCP tool result becomes the tool's value (or its error): every content kind,
structured content, and the size cap on what an untrusted server sends."""

from __future__ import annotations

import base64

import pytest
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from airlock.errors import ToolError
from airlock.tools._mcp_results import MAX_RESULT_BYTES, result_value

PNG = base64.b64encode(b"\x89PNG" + bytes(96)).decode()


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def test_text_blocks_are_the_result_text() -> None:
    result = CallToolResult(content=[text("line one"), text("line two")])
    assert result_value("s.t", result) == "line one\nline two"


def test_structured_content_is_the_result_and_its_text_copy_is_dropped() -> None:
    result = CallToolResult(content=[text('{"n": 1}')], structured_content={"n": 1, "tags": ["a"]})
    assert result_value("s.t", result) == {"n": 1, "tags": ["a"]}


def test_structured_content_beside_an_image_keeps_both() -> None:
    image = ImageContent(type="image", data=PNG, mime_type="image/png")
    result = CallToolResult(content=[text("chart"), image], structured_content={"points": 3})
    assert result_value("s.t", result) == {
        "structured_content": {"points": 3},
        "content": "chart\n[image image/png, 100 bytes]",
    }


def test_every_other_content_kind_is_a_short_note_or_its_text() -> None:
    blocks = [
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        AudioContent(type="audio", data=base64.b64encode(bytes(10)).decode(), mime_type="audio/wav"),
        ResourceLink(type="resource_link", uri="file:///r/report.pdf", name="report"),
        EmbeddedResource(
            type="resource", resource=TextResourceContents(uri="file:///r/notes.txt", text="the notes")
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(uri="file:///r/b.bin", blob=base64.b64encode(bytes(7)).decode()),
        ),
    ]
    assert result_value("s.t", CallToolResult(content=blocks)) == (
        "[image image/png, 100 bytes]\n"
        "[audio audio/wav, 10 bytes]\n"
        "[resource link file:///r/report.pdf (report)]\n"
        "[resource file:///r/notes.txt]\nthe notes\n"
        "[resource file:///r/b.bin, binary, 7 bytes]"
    )


def test_an_error_result_raises_with_the_servers_text() -> None:
    with pytest.raises(ToolError) as e:
        result_value("s.t", CallToolResult(content=[text("no such file: x.txt")], is_error=True))
    assert (e.value.kind, e.value.message) == ("execution_failed", "no such file: x.txt")
    with pytest.raises(ToolError) as e:
        result_value("s.t", CallToolResult(content=[], is_error=True))
    assert e.value.message == "s.t failed (the server gave no message)"


def test_a_huge_result_is_cut_with_a_marker() -> None:
    big = "x" * (MAX_RESULT_BYTES + 5000)
    value = result_value("s.t", CallToolResult(content=[text(big)]))
    assert isinstance(value, str)
    assert value.endswith("[truncated 5000 bytes]") and len(value) < MAX_RESULT_BYTES + 100
    structured = result_value("s.t", CallToolResult(content=[], structured_content={"blob": big}))
    assert (
        isinstance(structured, str) and structured.startswith('{"blob": "xxx') and "[truncated " in structured
    )

"""layer0 Content and its blocks ↔ proto."""

from __future__ import annotations

from airlock._proto.runner.v1 import runner_pb2 as pb
from layer0 import (
    Base64Source,
    Content,
    ContentBlock,
    CustomBlock,
    ImageBlock,
    ImageSource,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)

from ._primitives import decoder, json_field, json_to_proto, oneof
from ._problems import located


def content_to_proto(content: Content) -> pb.Content:
    """layer0 Content → proto."""
    if isinstance(content.root, str):
        return pb.Content(text=content.root)
    return pb.Content(blocks=pb.ContentBlocks(blocks=[block_to_proto(b) for b in content.root]))


@decoder
def content_from_proto(message: pb.Content) -> Content:
    """proto → layer0 Content."""
    if oneof(message, "kind") == "text":
        return Content(str(message.text))
    blocks = []
    for i, block in enumerate(message.blocks.blocks):
        with located(f"blocks[{i}]"):
            blocks.append(block_from_proto(block))
    return Content(blocks)


def image_to_proto(source: ImageSource, media_type: str) -> pb.ImageBlock:
    """A layer0 image source and its media type → proto ImageBlock."""
    if isinstance(source, Base64Source):
        return pb.ImageBlock(base64_data=source.data, media_type=media_type)
    return pb.ImageBlock(url=source.url, media_type=media_type)


def image_source_from_proto(message: pb.ImageBlock) -> ImageSource:
    """The layer0 image source of a proto ImageBlock."""
    if oneof(message, "source") == "base64_data":
        return Base64Source(data=message.base64_data)
    return UrlSource(url=message.url)


def block_to_proto(block: ContentBlock) -> pb.ContentBlock:
    """One layer0 content block → proto."""
    if isinstance(block, TextBlock):
        return pb.ContentBlock(text=pb.TextBlock(text=block.text))
    if isinstance(block, ImageBlock):
        return pb.ContentBlock(image=image_to_proto(block.source, block.media_type))
    if isinstance(block, ToolUseBlock):
        return pb.ContentBlock(
            tool_use=pb.ToolUseBlock(id=block.id, name=block.name, input=json_to_proto(block.input))
        )
    if isinstance(block, ToolResultBlock):
        return pb.ContentBlock(
            tool_result=pb.ToolResultBlock(
                tool_use_id=block.tool_use_id, content=block.content, is_error=block.is_error
            )
        )
    return pb.ContentBlock(
        custom=pb.CustomBlock(content_type=block.content_type, data=json_to_proto(block.data))
    )


@decoder
def block_from_proto(message: pb.ContentBlock) -> ContentBlock:
    """proto → one layer0 content block."""
    kind = oneof(message, "kind")
    with located(kind):
        if kind == "text":
            return TextBlock(text=message.text.text)
        if kind == "image":
            return ImageBlock(
                source=image_source_from_proto(message.image), media_type=message.image.media_type
            )
        if kind == "tool_use":
            use = message.tool_use
            return ToolUseBlock(id=use.id, name=use.name, input=json_field(use, "input"))
        if kind == "tool_result":
            result = message.tool_result
            return ToolResultBlock(
                tool_use_id=result.tool_use_id, content=result.content, is_error=result.is_error
            )
        custom = message.custom
        return CustomBlock(content_type=custom.content_type, data=json_field(custom, "data"))

"""Tool names on a provider's wire.

Airlock names a tool of an MCP server ``<server>.<tool>`` everywhere (specs, approval globs,
events); the Messages and Chat Completions APIs take only ``^[a-zA-Z0-9_-]{1,64}$``. A name
the APIs refuse is sent as a deterministic stand-in (``fs.read`` → ``fs_read_4074bc02``: its
characters made safe, cut, and 8 hex digits of its SHA-256), the same in every request of a
turn, and the model's calls are named back. Names the APIs accept go unchanged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from airlock.turn import ProviderRequest, ProviderResponse, ToolUsePart

__all__ = ["decode_tool_names", "encode_tool_names", "wire_tool_name"]

WIRE_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def wire_tool_name(name: str) -> str:
    """``name`` as the APIs accept it (itself when it already fits)."""
    if WIRE_TOOL_NAME.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', name)[:55]}_{digest}"


def encode_tool_names(request: ProviderRequest) -> tuple[ProviderRequest, dict[str, str]]:
    """``request`` with its tools and earlier calls named for the wire, and the map back."""
    names = {t.name for t in request.tools} | {
        p.name for m in request.messages for p in m.content if isinstance(p, ToolUsePart)
    }
    wire = {n: wire_tool_name(n) for n in names}
    back = {w: n for n, w in wire.items() if w != n}
    if not back:
        return request, {}
    tools = [t.model_copy(update={"name": wire[t.name]}) for t in request.tools]
    messages = [
        m.model_copy(
            update={
                "content": [
                    p.model_copy(update={"name": wire[p.name]}) if isinstance(p, ToolUsePart) else p
                    for p in m.content
                ]
            }
        )
        for m in request.messages
    ]
    return request.model_copy(update={"tools": tools, "messages": messages}), back


def decode_tool_names(response: ProviderResponse, back: Mapping[str, str]) -> ProviderResponse:
    """``response`` with the model's calls named as airlock names them."""
    if not back:
        return response
    content = [
        p.model_copy(update={"name": back.get(p.name, p.name)}) if isinstance(p, ToolUsePart) else p
        for p in response.content
    ]
    return response.model_copy(update={"content": content})

"""An MCP server's tool as a ``ToolDyn``, named ``<server>.<tool>``, and the checks of what a
server lists (it is untrusted: names, schemas and descriptions are checked and bounded).

Risk classes (what an approval gate's ``risks`` match) follow the MCP annotation defaults,
which the server may lower: ``destructive`` unless the tool says ``readOnlyHint: true``;
``external`` for every tool of an ``http`` server (it lives outside the sandbox), and for a
``stdio`` server's tool unless it says ``openWorldHint: false``. Hints are the server's own
word: to gate a server's tools for sure, name them (``server.*``) in the gate's ``tools``.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from airlock.errors import ToolError, shorten

from ._mcp_results import result_value

if TYPE_CHECKING:
    from mcp_types import Tool, ToolAnnotations

    from airlock.spec import McpServerSpec
    from airlock.turn import ToolContext

    from ._mcp_connection import McpConnection

__all__ = ["McpTool", "checked_tools", "mcp_tool_risks"]

#: A tool name as MCP defines it (SEP-986).
TOOL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
#: Bytes of a tool's description offered to the model.
MAX_DESCRIPTION_BYTES = 4096
#: Bytes of a tool's input schema (compact JSON).
MAX_SCHEMA_BYTES = 64 * 1024


def mcp_tool_risks(spec: McpServerSpec, annotations: ToolAnnotations | None) -> tuple[str, ...]:
    """The risk classes of a tool of ``spec``'s server (see the module docstring)."""
    read_only = annotations is not None and annotations.read_only_hint is True
    closed_world = annotations is not None and annotations.open_world_hint is False
    risks = [] if read_only else ["destructive"]
    if spec.transport == "http" or not closed_world:
        risks.append("external")
    return tuple(risks)


class McpTool:
    """One tool of an MCP server, offered as ``<server>.<tool>`` (``ToolDyn``); its input is
    checked against the server's schema before it is sent."""

    def __init__(self, connection: McpConnection, tool: Tool) -> None:
        self.connection = connection
        self.tool = tool.name
        self.name = f"{connection.name}.{tool.name}"
        text = (tool.description or tool.title or "").strip()
        self.description = (
            shorten(text, MAX_DESCRIPTION_BYTES) or f"Tool {tool.name} of MCP server {connection.name}."
        )
        self.input_schema: dict[str, Any] = tool.input_schema
        self.risks = mcp_tool_risks(connection.spec, tool.annotations)
        self._validator: Any = None

    def _invalid(self, input: dict[str, Any]) -> str | None:
        """Why ``input`` does not match the input schema (at most three reasons), or None."""
        from jsonschema import Draft202012Validator
        from jsonschema.validators import validator_for

        if self._validator is None:
            self._validator = validator_for(self.input_schema, default=Draft202012Validator)(
                self.input_schema
            )
        errors = sorted(self._validator.iter_errors(input), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        return "; ".join(
            f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {shorten(e.message, 200)}"
            for e in errors[:3]
        )

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue:
        """Call the tool on its server.

        Raises:
            ToolError: ``invalid_input`` for input that is not an object or that the server
                refuses; ``execution_failed`` for an error result (the server's text) and for
                a server that is gone or does not answer (see ``McpConnection.call``).
        """
        if not isinstance(input, dict):
            raise ToolError.invalid_input(f"{self.name}: the input must be a JSON object")
        problem = self._invalid(input)
        if problem is not None:
            raise ToolError.invalid_input(f"{self.name}: {problem}")
        result = await self.connection.call(self.tool, input)
        return result_value(self.name, result)


def _schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's input schema (None: it can)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'its input schema is not an object schema ({"type": "object", …})'
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"its input schema is larger than {MAX_SCHEMA_BYTES} bytes"
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as e:
        return f"its input schema is invalid: {shorten(e.message, 300)}"
    return None


def checked_tools(connection: McpConnection, listed: list[Tool]) -> tuple[list[McpTool], list[str]]:
    """The listed tools the server's ``allowed_tools`` admits, as ``McpTool``s, and the problems
    that keep the server from being used (each a sentence naming the server)."""
    spec = connection.spec
    label = f"MCP server {spec.name!r}"
    problems: list[str] = []
    seen: set[str] = set()
    tools: list[McpTool] = []
    for tool in listed:
        if not spec.allows(tool.name):
            continue
        shown = shorten(repr(tool.name), 200)
        if not TOOL_NAME.match(tool.name):
            problems.append(
                f"{label}: tool {shown} has an invalid name (1-128 of A-Z a-z 0-9 _ - .); "
                "leave it out with allowed_tools"
            )
        elif tool.name in seen:
            problems.append(f"{label}: it lists tool {shown} twice")
        elif (why := _schema_problem(tool.input_schema)) is not None:
            problems.append(f"{label}: tool {shown}: {why}; leave it out with allowed_tools")
        else:
            tools.append(McpTool(connection, tool))
        seen.add(tool.name)
    names = sorted(t.name for t in listed)
    for pattern in spec.allowed_tools or ():
        if not any(fnmatchcase(n, pattern) for n in names):
            offered = shorten(", ".join(names) or "(none)", 1000)
            problems.append(f"{label}: allowed_tools entry {pattern!r} matches none of its tools: {offered}")
    return tools, problems

"""Sandbox tools (bash, files, http, calculator) and the catalog AgentSpecs name them from.

Every file tool and ``bash`` is confined to a workspace root: paths that resolve outside it
(``..``, absolute paths, symlinks) are refused with ``ToolError.permission_denied``. Effect
tools (``write_memory``, ``delete_memory``, ``delegate``, ``handoff``, ``signal``) belong to
the turn, not here: :func:`build_tools` skips their names.

The tools' modules load at first use (:func:`build_tools`, or any of their names): a runner
adopts orphans (:func:`adopt_orphans`) at start and builds its tools at its first turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.errors import SpecError

from ._orphans import adopt_orphans

if TYPE_CHECKING:
    from airlock.turn import ToolDyn

    from ._base import SandboxTool, ToolInput, ToolOptions
    from ._bash import BashInput, BashOptions, BashTool
    from ._calculator import CalculatorInput, CalculatorTool, evaluate
    from ._custom import load_custom_tools
    from ._files import (
        EditFileInput,
        EditFileOptions,
        EditFileTool,
        ListFilesInput,
        ListFilesOptions,
        ListFilesTool,
        ReadFileInput,
        ReadFileOptions,
        ReadFileTool,
        WriteFileInput,
        WriteFileOptions,
        WriteFileTool,
    )
    from ._http import HttpRequestInput, HttpRequestOptions, HttpRequestTool
    from ._mcp_probe import McpProbe, probe_mcp_servers
    from ._mcp_tool import McpTool, mcp_tool_risks
    from ._mcp_toolset import McpToolSet, open_mcp_tools
    from ._workspace import Workspace


def available_tools() -> list[str]:
    """Names of the tools an AgentSpec may enable (effect tools are listed by the turn)."""
    from airlock.spec import SANDBOX_TOOLS

    return list(SANDBOX_TOOLS)


def build_tools(
    names: list[str], options: dict[str, dict[str, Any]], workspace: Path | None
) -> list[ToolDyn]:
    """The sandbox tools named in ``names``, in that order, configured from ``options``.

    Effect tool names are skipped (the turn implements those). ``options`` maps a tool name
    to its options (e.g. ``{"bash": {"timeout_s": 30}}``); options of tools not built are
    ignored.

    Raises:
        SpecError: an unknown tool name (the message lists the valid ones), invalid options
            for a tool, or a workspace tool (bash, file tools) requested without a workspace
            or with one that is not a directory.
    """
    from airlock.spec import EFFECT_TOOLS

    from ._bash import BashTool
    from ._calculator import CalculatorTool
    from ._files import EditFileTool, ListFilesTool, ReadFileTool, WriteFileTool
    from ._http import HttpRequestTool
    from ._workspace import Workspace

    workspace_tools: dict[str, Any] = {
        "bash": BashTool,
        "read_file": ReadFileTool,
        "write_file": WriteFileTool,
        "list_files": ListFilesTool,
        "edit_file": EditFileTool,
    }
    plain_tools: dict[str, Any] = {"http_request": HttpRequestTool, "calculator": CalculatorTool}
    tools: list[ToolDyn] = []
    root: Workspace | None = None
    for name in names:
        if name in EFFECT_TOOLS:
            continue
        if name in plain_tools:
            cls = plain_tools[name]
            tools.append(cls(cls.parse_options(options.get(name))))
        elif name in workspace_tools:
            if workspace is None:
                raise SpecError(f"tool {name!r} needs a workspace directory, and none was given")
            root = root or Workspace(workspace)
            cls = workspace_tools[name]
            tools.append(cls(cls.parse_options(options.get(name)), root))
        else:
            valid = ", ".join(sorted([*available_tools(), *EFFECT_TOOLS]))
            raise SpecError(f"unknown tool {name!r}; valid tools: {valid}")
    return tools


__all__ = [
    "BashInput",
    "BashOptions",
    "BashTool",
    "CalculatorInput",
    "CalculatorTool",
    "EditFileInput",
    "EditFileOptions",
    "EditFileTool",
    "HttpRequestInput",
    "HttpRequestOptions",
    "HttpRequestTool",
    "ListFilesInput",
    "ListFilesOptions",
    "ListFilesTool",
    "McpProbe",
    "McpTool",
    "McpToolSet",
    "ReadFileInput",
    "ReadFileOptions",
    "ReadFileTool",
    "SandboxTool",
    "ToolInput",
    "ToolOptions",
    "Workspace",
    "WriteFileInput",
    "WriteFileOptions",
    "WriteFileTool",
    "adopt_orphans",
    "available_tools",
    "build_tools",
    "evaluate",
    "load_custom_tools",
    "mcp_tool_risks",
    "open_mcp_tools",
    "probe_mcp_servers",
]

#: The public names defined by the modules loaded at first use.
_LAZY = frozenset(__all__) - globals().keys()
#: The modules defining them (all loaded together, at the first use of any).
_LAZY_MODULES = (
    "_base",
    "_bash",
    "_calculator",
    "_custom",
    "_files",
    "_http",
    "_mcp_probe",
    "_mcp_tool",
    "_mcp_toolset",
    "_workspace",
)

if not TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any

    def __getattr__(name: str) -> Any:
        """Load the tools' modules at first use."""
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        for where in _LAZY_MODULES:
            module = importlib.import_module(f".{where}", __name__)
            for public in _LAZY & vars(module).keys():
                globals()[public] = getattr(module, public)
        return globals()[name]

    def __dir__() -> list[str]:
        return sorted(globals().keys() | _LAZY)

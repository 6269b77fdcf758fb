"""``python -m notes_mcp``: the notes MCP server over stdio.

Three tools: ``add_note`` writes ``notes/<title>.md`` in the working directory, ``list_notes``
and ``read_note`` only read (their annotations say so, so airlock does not count them as
``destructive``; an approval gate can still name them: ``notes.*``).
"""

import re
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("notes")
NOTES = Path("notes")
TITLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,63}$")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _path(title: str) -> Path:
    if not TITLE.match(title):
        raise ToolError(f"invalid title {title!r}: letters, digits, spaces, '_' and '-' (at most 64)")
    return NOTES / f"{title}.md"


@server.tool(annotations=ToolAnnotations(open_world_hint=False))
def add_note(title: str, text: str) -> str:
    """Write a note (replacing one with the same title).

    Args:
        title: The note's title (letters, digits, spaces, '_' and '-').
        text: The note's text.
    """
    NOTES.mkdir(exist_ok=True)
    _path(title).write_text(text, encoding="utf-8")
    return f"saved {title!r}"


@server.tool(annotations=READ_ONLY)
def list_notes() -> list[str]:
    """The titles of every note, sorted."""
    return sorted(p.stem for p in NOTES.glob("*.md")) if NOTES.is_dir() else []


@server.tool(annotations=READ_ONLY)
def read_note(title: str) -> str:
    """The text of a note.

    Args:
        title: The note's title.
    """
    path = _path(title)
    if not path.is_file():
        raise ToolError(f"no note titled {title!r}")
    return path.read_text(encoding="utf-8")


if __name__ == "__main__":
    server.run()

"""A notes MCP server: notes kept as files in ``notes/`` of the working directory (in a
sandbox, the workspace). Run it with ``python -m notes_mcp`` (stdio)."""

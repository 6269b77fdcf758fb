"""Word-count tools for airlock agents (an example package of custom tools)."""

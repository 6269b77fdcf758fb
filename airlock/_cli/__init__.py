"""The ``airlock`` command's implementation (private; ``airlock.cli`` is the entry point).

Only ``airlock.cli`` and this package import typer and rich.
"""

"""Sandbox tools (bash, files, http) and the catalog AgentSpecs name them from."""

from __future__ import annotations


def available_tools() -> list[str]:
    """Names of the tools an AgentSpec may enable (effect tools are listed by the turn)."""
    return ["bash", "read_file", "write_file", "list_files", "edit_file", "http_request", "calculator"]


__all__ = ["available_tools"]

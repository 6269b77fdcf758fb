"""Typed identifiers: strings on the wire, distinct types in Python.

An ``AgentId`` never equals a ``SessionId`` with the same text, and a field typed
``AgentId`` refuses a ``SessionId``: mixing them up is caught, not silently accepted.
"""

from __future__ import annotations

from pydantic import ConfigDict, RootModel


class _TypedId(RootModel[str]):
    model_config = ConfigDict(frozen=True)

    def __init__(self, root: str) -> None:
        super().__init__(root)

    def as_str(self) -> str:
        """The identifier's text."""
        return self.root

    def __str__(self) -> str:
        return self.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"


class AgentId(_TypedId):
    """Identifies an agent (a registered Turn)."""


class SessionId(_TypedId):
    """Identifies a conversation whose history persists across turns."""


class WorkflowId(_TypedId):
    """Identifies a workflow execution (the target of signals and queries)."""


class ScopeId(_TypedId):
    """Identifies a custom state scope."""

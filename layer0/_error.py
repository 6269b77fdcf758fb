"""Errors of each protocol. They never go on the wire as JSON (as in the Rust crate).

Tree::

    Layer0Error
    ├── TurnError    kind: model | tool | context_assembly | retryable | non_retryable | other
    ├── OrchError    kind: agent_not_found | workflow_not_found | dispatch_failed |
    │                      signal_failed | turn_error | other
    ├── StateError   kind: not_found | write_failed | serialization | other
    ├── EnvError     kind: provision_failed | isolation_violation | credential_failed |
    │                      resource_exceeded | turn_error | other
    └── HookError    kind: failed | other

Each is built with a classmethod named after its kind (``TurnError.model("…")``).
"""

from __future__ import annotations

from typing import Literal, Self


class Layer0Error(Exception):
    """Root of every layer0 error."""

    kind: str

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self._prefix()}{self.message}"

    def _prefix(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.kind}({self.message!r})"


TurnErrorKind = Literal["model", "tool", "context_assembly", "retryable", "non_retryable", "other"]


class TurnError(Layer0Error):
    """Raised when a turn fails. ``retryable`` says whether a retry might succeed."""

    kind: TurnErrorKind

    def __init__(self, kind: TurnErrorKind, message: str, *, tool_name: str | None = None) -> None:
        super().__init__(kind, message)
        self.tool_name = tool_name

    def _prefix(self) -> str:
        return {
            "model": "model error: ",
            "tool": f"tool error in {self.tool_name}: ",
            "context_assembly": "context assembly failed: ",
            "retryable": "retryable: ",
            "non_retryable": "non-retryable: ",
            "other": "",
        }[self.kind]

    @property
    def is_retryable(self) -> bool:
        """True only for the ``retryable`` kind: the orchestrator's policy may retry."""
        return self.kind == "retryable"

    @classmethod
    def model(cls, message: str) -> Self:
        """The model call failed or its output is unusable."""
        return cls("model", message)

    @classmethod
    def tool(cls, tool_name: str, message: str) -> Self:
        """A tool failed in a way the loop cannot hand back to the model."""
        return cls("tool", message, tool_name=tool_name)

    @classmethod
    def context_assembly(cls, message: str) -> Self:
        """History or memory could not be read."""
        return cls("context_assembly", message)

    @classmethod
    def retryable(cls, message: str) -> Self:
        """Transient: rate limit, 5xx, timeout, lost connection."""
        return cls("retryable", message)

    @classmethod
    def non_retryable(cls, message: str) -> Self:
        """Permanent: bad input, auth failure, budget exceeded."""
        return cls("non_retryable", message)

    @classmethod
    def other(cls, message: str) -> Self:
        """Anything else, with context."""
        return cls("other", message)


OrchErrorKind = Literal[
    "agent_not_found", "workflow_not_found", "dispatch_failed", "signal_failed", "turn_error", "other"
]


class OrchError(Layer0Error):
    """Raised when orchestration fails."""

    kind: OrchErrorKind

    def __init__(self, kind: OrchErrorKind, message: str) -> None:
        super().__init__(kind, message)

    def _prefix(self) -> str:
        return {
            "agent_not_found": "agent not found: ",
            "workflow_not_found": "workflow not found: ",
            "dispatch_failed": "dispatch failed: ",
            "signal_failed": "signal delivery failed: ",
            "turn_error": "turn error: ",
            "other": "",
        }[self.kind]

    @classmethod
    def agent_not_found(cls, agent: str) -> Self:
        """No agent is registered under that id."""
        return cls("agent_not_found", agent)

    @classmethod
    def workflow_not_found(cls, workflow: str) -> Self:
        """No such workflow."""
        return cls("workflow_not_found", workflow)

    @classmethod
    def dispatch_failed(cls, message: str) -> Self:
        """The dispatch itself failed."""
        return cls("dispatch_failed", message)

    @classmethod
    def signal_failed(cls, message: str) -> Self:
        """A signal could not be delivered."""
        return cls("signal_failed", message)

    @classmethod
    def from_turn_error(cls, error: TurnError) -> Self:
        """The dispatched turn failed (the TurnError is the ``__cause__``)."""
        err = cls("turn_error", str(error))
        err.__cause__ = error
        return err

    @classmethod
    def other(cls, message: str) -> Self:
        """Anything else."""
        return cls("other", message)


StateErrorKind = Literal["not_found", "write_failed", "serialization", "other"]


class StateError(Layer0Error):
    """Raised when a state operation fails (a missing key on read is None, not an error)."""

    kind: StateErrorKind

    def __init__(self, kind: StateErrorKind, message: str) -> None:
        super().__init__(kind, message)

    def _prefix(self) -> str:
        return {
            "not_found": "not found: ",
            "write_failed": "write failed: ",
            "serialization": "serialization error: ",
            "other": "",
        }[self.kind]

    @classmethod
    def not_found(cls, scope: str, key: str) -> Self:
        """A required entry is missing."""
        return cls("not_found", f"{scope}/{key}")

    @classmethod
    def write_failed(cls, message: str) -> Self:
        """A write or delete could not be completed."""
        return cls("write_failed", message)

    @classmethod
    def serialization(cls, message: str) -> Self:
        """A value is not JSON or a key is invalid."""
        return cls("serialization", message)

    @classmethod
    def other(cls, message: str) -> Self:
        """Anything else."""
        return cls("other", message)


EnvErrorKind = Literal[
    "provision_failed",
    "isolation_violation",
    "credential_failed",
    "resource_exceeded",
    "turn_error",
    "other",
]


class EnvError(Layer0Error):
    """Raised when an environment cannot provide what its spec asks for."""

    kind: EnvErrorKind

    def __init__(self, kind: EnvErrorKind, message: str) -> None:
        super().__init__(kind, message)

    def _prefix(self) -> str:
        return {
            "provision_failed": "provisioning failed: ",
            "isolation_violation": "isolation violation: ",
            "credential_failed": "credential injection failed: ",
            "resource_exceeded": "resource limit exceeded: ",
            "turn_error": "turn error: ",
            "other": "",
        }[self.kind]

    @classmethod
    def provision_failed(cls, message: str) -> Self:
        """The sandbox could not be created or did not become ready."""
        return cls("provision_failed", message)

    @classmethod
    def isolation_violation(cls, message: str) -> Self:
        """The requested isolation is unavailable or would be weakened."""
        return cls("isolation_violation", message)

    @classmethod
    def credential_failed(cls, message: str) -> Self:
        """A credential could not be resolved or injected."""
        return cls("credential_failed", message)

    @classmethod
    def resource_exceeded(cls, message: str) -> Self:
        """The sandbox hit a resource limit (e.g. ``memory``)."""
        return cls("resource_exceeded", message)

    @classmethod
    def from_turn_error(cls, error: TurnError) -> Self:
        """The turn inside the environment failed (the TurnError is the ``__cause__``)."""
        err = cls("turn_error", str(error))
        err.__cause__ = error
        return err

    @classmethod
    def other(cls, message: str) -> Self:
        """Anything else."""
        return cls("other", message)


HookErrorKind = Literal["failed", "other"]


class HookError(Layer0Error):
    """Raised by a hook; logged by the turn, never halting it."""

    kind: HookErrorKind

    def __init__(self, kind: HookErrorKind, message: str) -> None:
        super().__init__(kind, message)

    def _prefix(self) -> str:
        return "hook failed: " if self.kind == "failed" else ""

    @classmethod
    def failed(cls, message: str) -> Self:
        """The hook failed."""
        return cls("failed", message)

    @classmethod
    def other(cls, message: str) -> Self:
        """Anything else."""
        return cls("other", message)


OperatorError = TurnError

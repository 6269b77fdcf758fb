"""Why a job ended without an output: a closed set of kinds, and whether trying again may help.

:class:`JobErrorKind` is every kind a :class:`~airlock.controller.JobError` can carry: the
controller's own (``controller``, ``cancelled``, ``timeout``, ``interrupted``) and the kinds
of the layer0 errors a job can fail with (TurnError, EnvError, OrchError, StateError,
HookError; a HookError's ``failed`` reads ``hook_failed``). Anything else reads ``other``.

``retryable`` says whether the same job, submitted again unchanged, may succeed:

* ``turn_error``: what the turn's own error says (a runner that stopped, a channel that
  dropped, a provider that was overloaded: ``TurnError.retryable``) — the one kind where a
  retryable stop and a permanent failure differ;
* ``retryable``, ``interrupted`` (the controller stopped), ``provision_failed`` (the sandbox
  could not be created: capacity, an image pull), ``write_failed`` (storage): yes;
* every other kind: no (the same request fails the same way, or a person decided: cancelled).
"""

from __future__ import annotations

from enum import StrEnum

from layer0 import TurnError

__all__ = ["RETRYABLE_KINDS", "JobErrorKind", "error_kind", "is_retryable", "kind_of"]


class JobErrorKind(StrEnum):
    """Every kind of a job's error (the wire's ``JOB_ERROR_KIND_*``)."""

    # the controller's own
    CONTROLLER = "controller"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    # the sandbox (EnvError) and the turn in it
    TURN_ERROR = "turn_error"
    PROVISION_FAILED = "provision_failed"
    ISOLATION_VIOLATION = "isolation_violation"
    CREDENTIAL_FAILED = "credential_failed"
    RESOURCE_EXCEEDED = "resource_exceeded"
    # a TurnError raised as such
    MODEL = "model"
    TOOL = "tool"
    CONTEXT_ASSEMBLY = "context_assembly"
    RETRYABLE = "retryable"
    NON_RETRYABLE = "non_retryable"
    # orchestration (OrchError)
    AGENT_NOT_FOUND = "agent_not_found"
    WORKFLOW_NOT_FOUND = "workflow_not_found"
    DISPATCH_FAILED = "dispatch_failed"
    SIGNAL_FAILED = "signal_failed"
    # state (StateError)
    NOT_FOUND = "not_found"
    WRITE_FAILED = "write_failed"
    SERIALIZATION = "serialization"
    # a hook (HookError.failed)
    HOOK_FAILED = "hook_failed"
    OTHER = "other"


#: Kinds whose job may succeed when submitted again unchanged (``turn_error``: its cause says).
RETRYABLE_KINDS = frozenset(
    {
        JobErrorKind.RETRYABLE,
        JobErrorKind.INTERRUPTED,
        JobErrorKind.PROVISION_FAILED,
        JobErrorKind.WRITE_FAILED,
    }
)
#: Names a kind was recorded under that read as another (a job's terminal state; a hook's).
_ALIASES = {"timed_out": JobErrorKind.TIMEOUT, "failed": JobErrorKind.HOOK_FAILED}
_KINDS = {kind.value: kind for kind in JobErrorKind}


def error_kind(name: object) -> JobErrorKind:
    """The kind a recorded name reads as (an unknown one: ``other``)."""
    if isinstance(name, JobErrorKind):
        return name
    text = str(name)
    return _KINDS.get(text) or _ALIASES.get(text, JobErrorKind.OTHER)


def is_retryable(kind: JobErrorKind, error: BaseException | None = None) -> bool:
    """Whether a job that failed with ``kind`` (raised as ``error``) may succeed if tried again."""
    if kind is JobErrorKind.TURN_ERROR:
        cause = error.__cause__ if error is not None else None
        return isinstance(cause, TurnError) and cause.is_retryable
    return kind in RETRYABLE_KINDS


def kind_of(error: BaseException) -> JobErrorKind:
    """The kind of what a job failed with (an error without a kind: ``controller``)."""
    kind = getattr(error, "kind", None)
    return error_kind(kind) if isinstance(kind, str) else JobErrorKind.CONTROLLER

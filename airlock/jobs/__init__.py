"""airlock.jobs: the job vocabulary and the client of the jobs API, without the server.

The states a job passes through, the job and its events, the errors a job ends with, the
report of its effects, :class:`ControllerClient` (the gRPC client of a controller) and
:class:`RemoteOrchestrator` (the layer0 Orchestrator over it). The
CLI and any SDK import this package; ``airlock.controller`` (the server) builds on it.
:mod:`airlock.jobs.convert`, :mod:`airlock.jobs.event_wire` and :mod:`airlock.jobs.identity_wire`
are the vocabulary's wire form, shared by the client and the server.

Every name loads at its first use: the CLI offers the job states without loading gRPC.
"""

import typing as _typing  # as private names: this package exports exactly __all__

from airlock.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from ._address import DEFAULT_ADDRESS, MAX_MESSAGE_BYTES
    from ._client import (
        ADDRESS_ENV,
        TOKEN_ENV,
        ControllerClient,
        ControllerError,
        default_token_file,
        resolve_token,
    )
    from ._dispatch import Dispatch, dispatch_concurrently
    from ._effects import EffectOutcome, EffectReport, OutcomeStatus
    from ._errors import RETRYABLE_KINDS, JobErrorKind, error_kind, is_retryable, kind_of
    from ._log_context import job_log_context, job_log_fields
    from ._model import (
        JOB_EVENT_DATA,
        ApprovalChanged,
        ApprovalWait,
        ChildJobChanged,
        EffectApplied,
        EventKind,
        FixedPointRun,
        Inspection,
        Job,
        JobError,
        JobEvent,
        JobEventData,
        JobFilter,
        JobOrigin,
        JobResumed,
        LogLine,
        ResumeCause,
        SandboxActivity,
        SignalRecorded,
        StateChanged,
        StoredFile,
        TreeBudgetChanged,
        TreeBudgetUse,
        WorkspaceChanged,
        utcnow,
    )
    from ._page_tokens import INVALID_PAGE_TOKEN, decode_page_token, encode_page_token
    from ._paths import default_data_dir
    from ._prune import PruneSummary
    from ._remote_orchestrator import RemoteOrchestrator
    from ._sandboxes import SandboxInfo, SandboxPhase
    from ._states import ACTIVE_STATES, TERMINAL_STATES, JobState
    from ._tls import (
        TLS_CA_ENV,
        TLS_CERT_ENV,
        TLS_ENV,
        TLS_KEY_ENV,
        TLS_SERVER_NAME_ENV,
        ClientTls,
        TlsFileError,
        client_tls,
        is_local_address,
        read_pem,
    )
    from .identity_wire import AuditRecord, CallerInfo, QuotaUse, TenantUse

__all__ = [
    "ACTIVE_STATES",
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "INVALID_PAGE_TOKEN",
    "JOB_EVENT_DATA",
    "MAX_MESSAGE_BYTES",
    "RETRYABLE_KINDS",
    "TERMINAL_STATES",
    "TLS_CA_ENV",
    "TLS_CERT_ENV",
    "TLS_ENV",
    "TLS_KEY_ENV",
    "TLS_SERVER_NAME_ENV",
    "TOKEN_ENV",
    "ApprovalChanged",
    "ApprovalWait",
    "AuditRecord",
    "CallerInfo",
    "ChildJobChanged",
    "ClientTls",
    "ControllerClient",
    "ControllerError",
    "Dispatch",
    "EffectApplied",
    "EffectOutcome",
    "EffectReport",
    "EventKind",
    "FixedPointRun",
    "Inspection",
    "Job",
    "JobError",
    "JobErrorKind",
    "JobEvent",
    "JobEventData",
    "JobFilter",
    "JobOrigin",
    "JobResumed",
    "JobState",
    "LogLine",
    "OutcomeStatus",
    "PruneSummary",
    "QuotaUse",
    "RemoteOrchestrator",
    "ResumeCause",
    "SandboxActivity",
    "SandboxInfo",
    "SandboxPhase",
    "SignalRecorded",
    "StateChanged",
    "StoredFile",
    "TenantUse",
    "TlsFileError",
    "TreeBudgetChanged",
    "TreeBudgetUse",
    "WorkspaceChanged",
    "client_tls",
    "decode_page_token",
    "default_data_dir",
    "default_token_file",
    "dispatch_concurrently",
    "encode_page_token",
    "error_kind",
    "is_local_address",
    "is_retryable",
    "job_log_context",
    "job_log_fields",
    "kind_of",
    "read_pem",
    "resolve_token",
    "utcnow",
]

#: Each name's module (loaded at the name's first use).
_WHERE = {
    "ACTIVE_STATES": "._states",
    "ADDRESS_ENV": "._client",
    "ApprovalChanged": "._model",
    "SandboxInfo": "._sandboxes",
    "SandboxPhase": "._sandboxes",
    "ApprovalWait": "._model",
    "ChildJobChanged": "._model",
    "TreeBudgetChanged": "._model",
    "TreeBudgetUse": "._model",
    "ControllerClient": "._client",
    "ControllerError": "._client",
    "DEFAULT_ADDRESS": "._address",
    "EffectApplied": "._model",
    "EffectOutcome": "._effects",
    "EffectReport": "._effects",
    "EventKind": "._model",
    "FixedPointRun": "._model",
    "Inspection": "._model",
    "JOB_EVENT_DATA": "._model",
    "Job": "._model",
    "JobError": "._model",
    "JobErrorKind": "._errors",
    "JobEvent": "._model",
    "JobEventData": "._model",
    "JobFilter": "._model",
    "JobOrigin": "._model",
    "JobResumed": "._model",
    "WorkspaceChanged": "._model",
    "JobState": "._states",
    "LogLine": "._model",
    "MAX_MESSAGE_BYTES": "._address",
    "OutcomeStatus": "._effects",
    "PruneSummary": "._prune",
    "RemoteOrchestrator": "._remote_orchestrator",
    "Dispatch": "._dispatch",
    "dispatch_concurrently": "._dispatch",
    "RETRYABLE_KINDS": "._errors",
    "ResumeCause": "._model",
    "SandboxActivity": "._model",
    "SignalRecorded": "._model",
    "StateChanged": "._model",
    "StoredFile": "._model",
    "AuditRecord": ".identity_wire",
    "CallerInfo": ".identity_wire",
    "QuotaUse": ".identity_wire",
    "TenantUse": ".identity_wire",
    "TERMINAL_STATES": "._states",
    "TOKEN_ENV": "._client",
    "TLS_CA_ENV": "._tls",
    "TLS_CERT_ENV": "._tls",
    "TLS_ENV": "._tls",
    "TLS_KEY_ENV": "._tls",
    "TLS_SERVER_NAME_ENV": "._tls",
    "ClientTls": "._tls",
    "TlsFileError": "._tls",
    "client_tls": "._tls",
    "is_local_address": "._tls",
    "read_pem": "._tls",
    "default_data_dir": "._paths",
    "default_token_file": "._client",
    "error_kind": "._errors",
    "is_retryable": "._errors",
    "job_log_context": "._log_context",
    "INVALID_PAGE_TOKEN": "._page_tokens",
    "decode_page_token": "._page_tokens",
    "encode_page_token": "._page_tokens",
    "job_log_fields": "._log_context",
    "kind_of": "._errors",
    "resolve_token": "._client",
    "utcnow": "._model",
}

if not _typing.TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any
    __getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)

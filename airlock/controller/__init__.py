"""airlock.controller: the controller service — durable jobs, scheduling, effects, gRPC.

::

    async with Controller(config, ControllerOptions(address="127.0.0.1:0")) as controller:
        async with ControllerClient(controller.address, controller.token) as client:
            job = await client.submit("demo-scripted", "What is 17 * 23?")
            job = await client.wait(job.id)

``Controller`` assembles the parts: :class:`SqliteJobStore` (the durable record),
:class:`JobService` (fair queue, bounded workers, max_duration, cancellation, effect
orchestration, session history), :class:`AgentRunner` (an agent's turn in its own sandbox:
the one run path, which ``airlock run`` shares), :class:`EffectExecutor` (a turn's declared
effects, each checked against its agent's policy, applied in order) and
:class:`ControllerServer` (the ``airlock.controller.v1.Controller`` gRPC service with
bearer-token auth). :class:`ControllerClient` is its client.
"""

from __future__ import annotations

from ._app import Controller, ControllerOptions
from ._client import ControllerClient, ControllerError, resolve_token
from ._data_dir import open_data_dir
from ._execute import AgentRunner, LocalModelKey
from ._grpc import (
    DEFAULT_ADDRESS,
    ControllerServer,
    ControllerServerError,
    load_or_create_token,
    read_token_file,
)
from ._grpc_errors import REASONS as ERROR_REASONS
from ._job_errors import JobErrorKind
from ._model import (
    JOB_EVENT_DATA,
    ApprovalChanged,
    ApprovalWait,
    ChildJobChanged,
    EffectApplied,
    EventKind,
    FixedPointRun,
    Job,
    JobError,
    JobEvent,
    JobEventData,
    JobFilter,
    JobResumed,
    JobState,
    LogLine,
    SandboxActivity,
    SignalRecorded,
    StateChanged,
    StoredFile,
)
from ._orchestrator import JobOrchestrator
from ._paths import default_data_dir
from ._queue import FairQueue, QueuedJob
from ._service import JobService
from ._service_controls import Inspection
from ._service_core import JobNotAwaiting, JobNotFound, NotAnApprover, ServiceSettings
from ._store import JobStoreError, SqliteJobStore
from ._store_backup import StoreBackup, backup_store, backups, restore_store
from .effects import EffectExecutor, EffectOutcome, EffectReport

__all__ = [
    "DEFAULT_ADDRESS",
    "ERROR_REASONS",
    "JOB_EVENT_DATA",
    "AgentRunner",
    "ApprovalChanged",
    "ApprovalWait",
    "ChildJobChanged",
    "Controller",
    "ControllerClient",
    "ControllerError",
    "ControllerOptions",
    "ControllerServer",
    "ControllerServerError",
    "EffectApplied",
    "EffectExecutor",
    "EffectOutcome",
    "EffectReport",
    "EventKind",
    "FairQueue",
    "FixedPointRun",
    "Inspection",
    "Job",
    "JobError",
    "JobErrorKind",
    "JobEvent",
    "JobEventData",
    "JobFilter",
    "JobNotAwaiting",
    "JobNotFound",
    "JobOrchestrator",
    "JobResumed",
    "JobService",
    "JobState",
    "JobStoreError",
    "LocalModelKey",
    "LogLine",
    "NotAnApprover",
    "QueuedJob",
    "SandboxActivity",
    "ServiceSettings",
    "SignalRecorded",
    "SqliteJobStore",
    "StateChanged",
    "StoreBackup",
    "StoredFile",
    "backup_store",
    "backups",
    "default_data_dir",
    "load_or_create_token",
    "open_data_dir",
    "read_token_file",
    "resolve_token",
    "restore_store",
]

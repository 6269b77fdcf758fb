"""airlock.controller: the controller service — durable jobs, scheduling, effects, gRPC.

::

    async with Controller(config, ControllerOptions(address="127.0.0.1:0")) as controller:
        async with ControllerClient(controller.address, controller.token) as client:
            job = await client.submit("demo-scripted", "What is 17 * 23?")
            job = await client.wait(job.id)

``Controller`` assembles the parts: a :class:`JobStore` (the durable record: SQLite, or
PostgreSQL for replicas),
:class:`JobService` (fair queue, bounded workers, max_duration, cancellation, effect
orchestration, session history), :class:`AgentRunner` (an agent's turn in its own sandbox:
the one run path, which ``airlock run`` shares), :class:`EffectExecutor` (a turn's declared
effects, each checked against its agent's policy, applied in order) and
:class:`ControllerServer` (the ``airlock.controller.v1.Controller`` gRPC service with
bearer-token auth). The job vocabulary and the client (:class:`airlock.jobs.ControllerClient`)
live in :mod:`airlock.jobs`, which this server builds on.
"""

from __future__ import annotations

from ._access import PermissionDenied, Use, scoped_filter
from ._access import check as check_use
from ._access import job_for as authorized_job
from ._access import require as require_permission
from ._app import Controller, ControllerOptions
from ._audit_log import AuditFilter
from ._claims import Claim, Claims, LeaseLost
from ._data_dir import open_data_dir
from ._execute import AgentRunner, LocalModelKey
from ._fork_point import ForkRefused
from ._grpc import (
    ControllerServer,
    ControllerServerError,
    load_or_create_token,
    read_token_file,
)
from ._grpc_errors import REASONS as ERROR_REASONS
from ._grpc_identity import IdentityApi
from ._job_events import JobListener
from ._observer import ControllerObserver, controller_observer, set_controller_observer
from ._orchestrator import JobOrchestrator
from ._pruning import Pruner
from ._quotas import QuotaExceeded, Quotas, capped
from ._retention import Cutoffs, PruneReport
from ._sandboxes import SandboxNotFound, SandboxRefused
from ._service import JobService
from ._service_settings import JobNotAwaiting, JobNotFound, NotAnApprover, ServiceSettings
from ._store import JobStore, JobStoreError, new_job_id
from ._store_backup import StoreBackup, backup_store, backups, restore_store
from ._store_backup_postgres import backup_postgres_store, restore_postgres_store
from ._store_postgres import PostgresJobStore
from ._store_sqlite import SqliteJobStore
from ._tenant_state import TenantState, tenant_state, workflow_key
from ._tls import ServerTls
from .effects import EffectExecutor

__all__ = [
    "ERROR_REASONS",
    "AgentRunner",
    "AuditFilter",
    "Claim",
    "Claims",
    "Controller",
    "ControllerObserver",
    "ControllerOptions",
    "ControllerServer",
    "ControllerServerError",
    "Cutoffs",
    "EffectExecutor",
    "ForkRefused",
    "IdentityApi",
    "JobListener",
    "JobNotAwaiting",
    "JobNotFound",
    "JobOrchestrator",
    "JobService",
    "JobStore",
    "JobStoreError",
    "LeaseLost",
    "LocalModelKey",
    "NotAnApprover",
    "PermissionDenied",
    "PostgresJobStore",
    "PruneReport",
    "Pruner",
    "QuotaExceeded",
    "Quotas",
    "SandboxNotFound",
    "SandboxRefused",
    "ServerTls",
    "ServiceSettings",
    "SqliteJobStore",
    "StoreBackup",
    "TenantState",
    "Use",
    "authorized_job",
    "backup_postgres_store",
    "backup_store",
    "backups",
    "capped",
    "check_use",
    "controller_observer",
    "load_or_create_token",
    "new_job_id",
    "open_data_dir",
    "read_token_file",
    "require_permission",
    "restore_postgres_store",
    "restore_store",
    "scoped_filter",
    "set_controller_observer",
    "tenant_state",
    "workflow_key",
]

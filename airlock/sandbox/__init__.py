"""airlock.sandbox: where a turn runs — the Sandbox port, the backend registry, the backends.

::

    sandbox = backend("docker").create(secrets=resolver)
    request = SandboxRequest.compile(agent, TurnInput.new("hi"), environment, state=snapshot)
    output = await sandbox.run(request)

Vocabulary: a **backend** (``DockerBackend``, ``KubernetesBackend``, ``ProcessBackend``, each
in its package's ``_backend.py``) implements the :class:`Sandbox` port the controller uses and
is declared to the registry by a :class:`Backend` (what it provides, its doctor checks, its
factory; :func:`backend` looks one up by name). For each turn it provisions a **sandbox
instance** (:class:`SandboxInstance`, the running box: ``DockerInstance``, ``KubernetesInstance``,
``ProcessInstance``, each in its package's ``_instance.py``), which goes through the one
lifecycle of :mod:`._lifecycle`. :class:`SandboxEnvironment` adapts any backend to
``layer0.Environment``. A request carries the **running agent** (:class:`RunningAgent`, the
agent as it will run): the controller applies its steps, the backend its last one
(``with_sidecar_routes``), and the instance is given :meth:`RunningAgent.final`.
"""

from ._declaration import Backend, Capabilities, DoctorCheck, Reaped, Reaper
from ._environment import SandboxEnvironment, state_snapshot
from ._events import SandboxEvent, SandboxEventSink
from ._handle import TurnHandle, TurnNotRunning, WorkspaceRestore
from ._instance import SandboxInstance
from ._isolation import RequestedIsolation, requested_isolation
from ._limits import Limits, SandboxDefaults, resolve_limits
from ._observer import SandboxObserver, isolation_of, sandbox_observer, set_sandbox_observer
from ._placement import Placement, Toleration, refuse_placement
from ._pool import PoolSettings, PoolStats, ShapeStats, WarmPool
from ._port import (
    ClosableSandbox,
    LongLivedSandbox,
    ResumableSandbox,
    Sandbox,
    SandboxRequest,
    StateEntry,
    WarmableSandbox,
    compile_sandbox_plan,
)
from ._proof import ISOLATION_STATUSES, IsolationProof, IsolationStatus, ProvingSandbox
from ._registry import backend, backend_names, backends
from ._running import LOCAL_MODEL, RunningAgent, names_local_model, sidecar_agent
from ._session import EventRelay, KeepableInstance, LongLivedBox, SandboxBusy

__all__ = [
    "ISOLATION_STATUSES",
    "LOCAL_MODEL",
    "Backend",
    "Capabilities",
    "ClosableSandbox",
    "DoctorCheck",
    "EventRelay",
    "IsolationProof",
    "IsolationStatus",
    "KeepableInstance",
    "Limits",
    "LongLivedBox",
    "LongLivedSandbox",
    "Placement",
    "PoolSettings",
    "PoolStats",
    "ProvingSandbox",
    "Reaped",
    "Reaper",
    "RequestedIsolation",
    "ResumableSandbox",
    "RunningAgent",
    "Sandbox",
    "SandboxBusy",
    "SandboxDefaults",
    "SandboxEnvironment",
    "SandboxEvent",
    "SandboxEventSink",
    "SandboxInstance",
    "SandboxObserver",
    "SandboxRequest",
    "ShapeStats",
    "StateEntry",
    "Toleration",
    "TurnHandle",
    "TurnNotRunning",
    "WarmPool",
    "WarmableSandbox",
    "WorkspaceRestore",
    "backend",
    "backend_names",
    "backends",
    "compile_sandbox_plan",
    "isolation_of",
    "names_local_model",
    "refuse_placement",
    "requested_isolation",
    "resolve_limits",
    "sandbox_observer",
    "set_sandbox_observer",
    "sidecar_agent",
    "state_snapshot",
]

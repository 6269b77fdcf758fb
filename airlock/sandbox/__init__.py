"""airlock.sandbox: where a turn runs — the Sandbox port, the backend registry, the backends.

::

    sandbox = backend("docker").create(secrets=resolver)
    request = SandboxRequest.compile(agent, TurnInput.new("hi"), environment, state=snapshot)
    output = await sandbox.run(request)

Each backend (:mod:`.docker`, :mod:`.process`) implements :class:`Sandbox` and declares a
:class:`Backend` (what it provides, its doctor checks, its factory); :func:`backend` looks one
up by name. :class:`SandboxEnvironment` adapts any backend to ``layer0.Environment``.
"""

from ._declaration import Backend, Capabilities, DoctorCheck, Reaped, Reaper
from ._environment import SandboxEnvironment, state_snapshot
from ._events import SandboxEvent, SandboxEventSink
from ._handle import TurnHandle, TurnNotRunning
from ._isolation import RequestedIsolation, requested_isolation
from ._limits import Limits, SandboxDefaults, resolve_limits
from ._placement import Placement, Toleration, refuse_placement
from ._pool import PoolSettings, PoolStats, ShapeStats, WarmPool
from ._port import (
    ClosableSandbox,
    ResumableSandbox,
    Sandbox,
    SandboxRequest,
    StateEntry,
    WarmableSandbox,
    compile_sandbox_plan,
)
from ._proof import ISOLATION_STATUSES, IsolationProof, IsolationStatus, ProvingSandbox
from ._registry import backend, backend_names, backends

__all__ = [
    "ISOLATION_STATUSES",
    "Backend",
    "Capabilities",
    "ClosableSandbox",
    "DoctorCheck",
    "IsolationProof",
    "IsolationStatus",
    "Limits",
    "Placement",
    "PoolSettings",
    "PoolStats",
    "ProvingSandbox",
    "Reaped",
    "Reaper",
    "RequestedIsolation",
    "ResumableSandbox",
    "Sandbox",
    "SandboxDefaults",
    "SandboxEnvironment",
    "SandboxEvent",
    "SandboxEventSink",
    "SandboxRequest",
    "ShapeStats",
    "StateEntry",
    "Toleration",
    "TurnHandle",
    "TurnNotRunning",
    "WarmPool",
    "WarmableSandbox",
    "backend",
    "backend_names",
    "backends",
    "compile_sandbox_plan",
    "refuse_placement",
    "requested_isolation",
    "resolve_limits",
    "state_snapshot",
]

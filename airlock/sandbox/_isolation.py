"""Which isolation boundary an EnvironmentSpec asks for (backend-neutral).

:func:`requested_isolation` refuses what no container backend provides (wasm, unknown custom
boundaries, process-only, gvisor together with micro_vm); each backend then maps the kind to
its own mechanism (a Docker runtime, a Kubernetes RuntimeClass) and refuses what it lacks,
never falling back to a weaker boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from layer0 import (
    ContainerIsolation,
    CustomIsolation,
    EnvError,
    EnvironmentSpec,
    GvisorIsolation,
    MicroVmIsolation,
    NetworkPolicyIsolation,
    ProcessIsolation,
    WasmIsolation,
)

__all__ = ["IsolationKind", "RequestedIsolation", "requested_isolation"]

IsolationKind = Literal["container", "gvisor", "micro_vm"]


@dataclass(frozen=True)
class RequestedIsolation:
    """The strongest boundary asked for, and the image a ``container`` boundary names."""

    kind: IsolationKind
    image: str | None = None


def requested_isolation(spec: EnvironmentSpec, backend: str) -> RequestedIsolation:
    """The boundary ``spec.isolation`` asks of a container backend called ``backend``.

    Raises:
        EnvError: ``isolation_violation`` for process-only, wasm, unknown custom or
            conflicting boundaries (gvisor + micro_vm).
    """
    image: str | None = None
    strongest: IsolationKind = "container"
    for b in spec.isolation:
        match b:
            case ContainerIsolation():
                image = b.image or image
            case GvisorIsolation() | MicroVmIsolation():
                if strongest not in ("container", b.type):
                    raise EnvError.isolation_violation(
                        f"isolation asks for both {strongest} and {b.type}; a sandbox has one runtime"
                    )
                strongest = "gvisor" if isinstance(b, GvisorIsolation) else "micro_vm"
            case ProcessIsolation() | NetworkPolicyIsolation():
                pass  # implied by a container; rules arrive compiled in the request's plan
            case WasmIsolation():
                raise EnvError.isolation_violation(
                    f"wasm isolation is not provided by the {backend} backend (no WebAssembly runtime)"
                )
            case CustomIsolation():
                raise EnvError.isolation_violation(
                    f"unknown custom isolation boundary {b.boundary_type!r}; the {backend} backend provides "
                    "container, gvisor and micro_vm"
                )
    if spec.isolation and all(isinstance(b, ProcessIsolation) for b in spec.isolation):
        raise EnvError.isolation_violation(
            f"the spec asks for process isolation only; the {backend} backend runs containers — use "
            "the process backend for a plain process (the weakest boundary), or ask for container"
        )
    return RequestedIsolation(strongest, image)

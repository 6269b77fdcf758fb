"""An EnvironmentSpec's resource limits over a backend's defaults (every sandbox is limited).

Backend-neutral: Docker renders :class:`Limits` as container limits, Kubernetes as a pod's
requests/limits and emptyDir sizes. Both read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from airlock.policy.resources import parse_cpu, parse_disk, parse_gpu, parse_memory
from layer0 import EnvError, EnvironmentSpec

__all__ = ["Limits", "SandboxDefaults", "resolve_limits"]


@dataclass(frozen=True)
class SandboxDefaults:
    """Limits applied when the spec leaves them unset (every sandbox is limited)."""

    cpu: str = "1"
    memory: str = "512Mi"
    #: Size of the writable workspace tmpfs.
    disk: str = "256Mi"
    tmp: str = "64Mi"
    pids: int = 256


@dataclass(frozen=True)
class Limits:
    """Parsed resource limits."""

    nano_cpus: int
    memory_bytes: int
    disk_bytes: int
    tmp_bytes: int
    pids: int
    gpus: int | None  # None: no GPU; -1: all

    def describe(self) -> str:
        """``cpu=… memory=…Mi`` for logs."""
        return f"cpu={self.nano_cpus / 1e9:g} memory={self.memory_bytes // 2**20}Mi"


def resolve_limits(spec: EnvironmentSpec, defaults: SandboxDefaults = SandboxDefaults()) -> Limits:
    """Parse ``spec.resources`` over ``defaults``.

    Raises:
        EnvError: ``resource_exceeded`` naming the bad field and value.
    """
    r = spec.resources
    try:
        return Limits(
            nano_cpus=parse_cpu(r.cpu if r and r.cpu else defaults.cpu),
            memory_bytes=parse_memory(r.memory if r and r.memory else defaults.memory),
            disk_bytes=parse_disk(r.disk if r and r.disk else defaults.disk),
            tmp_bytes=parse_disk(defaults.tmp),
            pids=defaults.pids,
            gpus=parse_gpu(r.gpu) if r and r.gpu else None,
        )
    except ValueError as e:
        raise EnvError.resource_exceeded(f"invalid resource limit: {e}") from e

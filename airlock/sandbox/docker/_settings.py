"""The Docker backend's settings: the ``backends.docker`` section of ``airlock.yaml``.

gVisor needs two registrations with the engine, because its network mode is a runtime
argument (``runtimeArgs`` in ``/etc/docker/daemon.json``), not a container setting:

- ``gvisor``: a sandbox with no network at all (``--network=none``);
- ``gvisor_networked``: a sandbox on its internal network with the egress proxy
  (``--network=host``: gVisor's own netstack refuses to start in these containers, so it
  uses the container's network namespace through the host's stack; the system-call
  boundary still holds).

Both need ``--host-uds=create``: the runner listens on a Unix socket in the bind-mounted
control directory, and without that flag gVisor keeps such a socket inside the sandbox,
where the controller cannot dial it. ``create`` lets the sandbox *create* host sockets
on its bind mounts (only the control directory is one); connecting to host sockets
(``open``) stays refused. :data:`DAEMON_JSON` is the registration; ``airlock doctor``
checks the arguments.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Network
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ._subnets import MAX_PREFIX, parse_range

__all__ = [
    "GVISOR_ARGS",
    "GVISOR_NETWORKED_ARGS",
    "KATA_RUNTIMES",
    "DockerRuntimes",
    "DockerSettings",
    "daemon_json",
    "daemon_json_text",
]

#: The Kata Containers runtime names Docker installations register (any one serves micro_vm).
KATA_RUNTIMES = ("kata", "kata-runtime", "io.containerd.kata.v2", "kata-qemu", "kata-clh", "kata-fc")
#: The runtime arguments each gVisor registration must carry.
GVISOR_ARGS = ("--network=none", "--host-uds=create")
GVISOR_NETWORKED_ARGS = ("--network=host", "--host-uds=create")


class DockerRuntimes(BaseModel):
    """Which registered engine runtime provides each isolation kind (``container`` is runc)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: gVisor for sandboxes with no network (``runtimeArgs``: :data:`GVISOR_ARGS`).
    gvisor: str = "runsc"
    #: gVisor for sandboxes on a network (``runtimeArgs``: :data:`GVISOR_NETWORKED_ARGS`).
    gvisor_networked: str = "runsc-hostnet"
    #: Kata Containers runtimes for micro_vm, the first one registered wins.
    micro_vm: tuple[str, ...] = KATA_RUNTIMES

    @field_validator("gvisor", "gvisor_networked")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a runtime name cannot be empty")
        return value

    @field_validator("micro_vm")
    @classmethod
    def _some(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or not all(v.strip() for v in value):
            raise ValueError("name at least one runtime, none empty")
        return value


class DockerSettings(BaseModel):
    """How the Docker backend maps isolation kinds to the engine's runtimes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runtimes: DockerRuntimes = Field(default_factory=DockerRuntimes)
    #: The weakest boundary any sandbox gets: ``gvisor`` runs every agent that asks for a
    #: plain container under gVisor instead (an upgrade, never a downgrade: micro_vm stays).
    isolation_floor: Literal["container", "gvisor"] = "container"
    #: The private range every sandbox's internal network takes its subnet from; it must not
    #: overlap the host's routes or other networks (``airlock doctor`` checks).
    internal_subnets: str = "10.213.0.0/16"
    #: The size of each internal network's subnet: a /28 (16 addresses) by default, at most
    #: a /29; the range holds ``2 ** (internal_prefix - range prefix)`` sandboxes with egress.
    internal_prefix: int = 28
    #: Seconds a sandbox with egress waits for a free subnet while the range is full (0:
    #: fails at once).
    internal_subnet_wait: float = Field(default=30.0, ge=0)

    @field_validator("internal_subnets")
    @classmethod
    def _private_range(cls, value: str) -> str:
        return str(parse_range(value))

    @field_validator("internal_prefix")
    @classmethod
    def _prefix_fits(cls, value: int, info: ValidationInfo) -> int:
        pool = info.data.get("internal_subnets")  # absent when it was refused itself
        low = IPv4Network(pool).prefixlen if pool else 8
        if not low <= value <= MAX_PREFIX:
            of = f" (the prefix of internal_subnets {pool})" if pool else ""
            raise ValueError(
                f"must be between {low}{of} and {MAX_PREFIX} (a smaller subnet cannot hold the "
                f"sandbox and its proxy), not {value}"
            )
        return value

    @property
    def internal_range(self) -> IPv4Network:
        """:attr:`internal_subnets` as a network."""
        return IPv4Network(self.internal_subnets)


def daemon_json(runtimes: DockerRuntimes | None = None, runsc: str = "/usr/bin/runsc") -> dict[str, Any]:
    """The ``runtimes`` entry of ``/etc/docker/daemon.json`` that registers both gVisor runtimes."""
    names = runtimes or DockerRuntimes()
    return {
        "runtimes": {
            names.gvisor: {"path": runsc, "runtimeArgs": list(GVISOR_ARGS)},
            names.gvisor_networked: {"path": runsc, "runtimeArgs": list(GVISOR_NETWORKED_ARGS)},
        }
    }


def daemon_json_text(runtimes: DockerRuntimes | None = None) -> str:
    """:func:`daemon_json` as the text to paste into ``/etc/docker/daemon.json``."""
    return json.dumps(daemon_json(runtimes))

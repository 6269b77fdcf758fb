"""The Docker backend: each turn in a fresh hardened container on a real Docker engine."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from airlock.policy import SecretResolver
from layer0 import ContainerIsolation

from .._backend import Backend, Capabilities, DoctorCheck
from .._limits import SandboxDefaults
from ._config import GVISOR_RUNTIMES, KATA_RUNTIMES
from ._doctor import doctor_checks
from ._environment import DockerEnvironment, DockerSandbox
from ._labels import LABEL_OWNER, LABEL_SANDBOX
from ._reaper import ReapReport, default_state_dir, reap_orphans

__all__ = [
    "BACKEND",
    "GVISOR_RUNTIMES",
    "KATA_RUNTIMES",
    "LABEL_OWNER",
    "LABEL_SANDBOX",
    "DockerEnvironment",
    "DockerSandbox",
    "ReapReport",
    "SandboxDefaults",
    "default_state_dir",
    "reap_orphans",
]


async def _reap(
    state_dir: Path | None = None, *, include_live: bool = False, settings: BaseModel | None = None
) -> ReapReport | None:
    """Remove sandboxes whose controller process is gone (None: no engine reachable)."""
    import asyncio

    from airlock.images import docker_client
    from layer0 import EnvError

    try:
        client = await asyncio.to_thread(docker_client)
    except EnvError:
        return None
    try:
        return await asyncio.to_thread(reap_orphans, client, state_dir, include_live=include_live)
    finally:
        client.close()


async def _doctor(settings: BaseModel | None = None) -> list[DoctorCheck]:
    return await doctor_checks()


def _create(
    *,
    secrets: SecretResolver | None,
    state_dir: Path | None,
    image: str | None,
    sweep: bool,
    settings: BaseModel | None,
) -> DockerSandbox:
    return DockerSandbox(secrets=secrets, state_dir=state_dir, image=image, sweep=sweep)


BACKEND = Backend(
    name="docker",
    summary="a fresh hardened container per turn on a Docker engine (runc, gVisor or Kata)",
    isolations=frozenset({"container", "gvisor", "micro_vm"}),
    default_isolation=(ContainerIsolation(),),
    capabilities=Capabilities(
        network_policy=True, resource_limits=True, credentials=True, model_endpoint="egress_proxy"
    ),
    factory=_create,
    doctor=_doctor,
    reap=_reap,
)

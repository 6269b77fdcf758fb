"""The Docker backend: each turn in a fresh hardened container on a real Docker engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from airlock.policy import SecretResolver
from layer0 import ContainerIsolation, EnvironmentSpec

from .._declaration import Backend, Capabilities, DoctorCheck
from .._isolation import requested_isolation
from .._limits import SandboxDefaults
from .._pool import WarmPool
from ._backend import DockerBackend
from ._doctor import doctor_checks
from ._environment import DockerEnvironment
from ._labels import LABEL_OWNER, LABEL_SANDBOX
from ._reaper import ReapReport, default_state_dir, reap_orphans
from ._settings import KATA_RUNTIMES, DockerRuntimes, DockerSettings, daemon_json, daemon_json_text

__all__ = [
    "BACKEND",
    "KATA_RUNTIMES",
    "LABEL_OWNER",
    "LABEL_SANDBOX",
    "DockerBackend",
    "DockerEnvironment",
    "DockerRuntimes",
    "DockerSettings",
    "ReapReport",
    "SandboxDefaults",
    "daemon_json",
    "daemon_json_text",
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


def _local_image(environment: EnvironmentSpec) -> str:
    """The image a sandbox of ``environment`` runs: its isolation's, else the runner image
    (as ``DockerBackend`` chooses)."""
    from airlock.images import runner_image_tag

    return requested_isolation(environment, "docker").image or runner_image_tag()


async def _doctor(settings: BaseModel | None = None) -> list[DoctorCheck]:
    return await doctor_checks(_settings(settings))


def _settings(settings: BaseModel | None) -> DockerSettings:
    return settings if isinstance(settings, DockerSettings) else DockerSettings()


def _create(
    *,
    secrets: SecretResolver | None,
    state_dir: Path | None,
    image: str | None,
    sweep: bool,
    settings: BaseModel | None,
    pool: WarmPool[Any] | None = None,
) -> DockerBackend:
    return DockerBackend(
        secrets=secrets,
        state_dir=state_dir,
        image=image,
        sweep=sweep,
        settings=_settings(settings),
        pool=pool,
    )


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
    settings=DockerSettings,
    local_image=_local_image,
)

"""``airlock doctor``'s questions to the Docker backend: engine, runner image, runtimes."""

from __future__ import annotations

import asyncio
from typing import Any

from airlock.images import LABEL_DIGEST, checkout_digest, docker_client, docker_errors, runner_image_tag
from airlock.sandbox._backend import DoctorCheck

from ._config import GVISOR_RUNTIMES, KATA_RUNTIMES

__all__ = ["doctor_checks"]


async def doctor_checks() -> list[DoctorCheck]:
    """The engine answers; the runner image is built from these sources; gVisor and Kata
    runtimes are registered (absent is a warning: such agents are refused, never downgraded)."""
    return await asyncio.to_thread(_checks)


def _checks() -> list[DoctorCheck]:
    checks, client = _check_engine()
    if client is not None:
        try:
            checks.append(_check_image(client))
            checks += _check_runtimes(client)
        finally:
            client.close()
    return checks


def _check_engine() -> tuple[list[DoctorCheck], Any]:
    """The engine answers (and its version); returns the client for the next checks, or None."""
    try:
        client = docker_client(timeout=10)
        version = client.version()
    except Exception as e:
        return [
            DoctorCheck(
                "docker",
                "error",
                f"Docker engine unreachable: {e}",
                "start Docker (dockerd) or set DOCKER_HOST; the docker backend needs it",
            )
        ], None
    return [
        DoctorCheck(
            "docker",
            "ok",
            f"Docker engine {version.get('Version', '?')} reachable (API {version.get('ApiVersion', '?')})",
        )
    ], client


def _check_image(client: Any) -> DoctorCheck:
    """The runner image exists (and was built from these sources)."""
    tag = runner_image_tag()
    errors = docker_errors()
    try:
        image = client.images.get(tag)
    except errors.ImageNotFound:
        return DoctorCheck("image", "error", f"runner image {tag} is missing", "run: airlock images build")
    except errors.DockerException as e:
        return DoctorCheck("image", "error", f"cannot inspect {tag}: {e}", "check the Docker engine")
    size = (image.attrs.get("Size") or 0) / 1e6
    found = f"runner image {tag} present ({image.id[:19]}, {size:.0f} MB)"
    label = (image.attrs.get("Config") or {}).get("Labels") or {}
    current = checkout_digest()
    if current is not None and label.get(LABEL_DIGEST) not in (None, current):
        return DoctorCheck(
            "image",
            "warning",
            found + ", but built from other sources than this checkout",
            "run: airlock images build",
        )
    return DoctorCheck("image", "ok", found)


def _check_runtimes(client: Any) -> list[DoctorCheck]:
    """gVisor (runsc) and Kata runtimes, from ``docker info``; absent is a warning."""
    try:
        info = client.info()
    except Exception as e:
        return [DoctorCheck("runtimes", "error", f"docker info failed: {e}", "check the Docker engine")]
    runtimes = set((info.get("Runtimes") or {}).keys())
    out = []
    gvisor = [r for r in GVISOR_RUNTIMES if r in runtimes]
    if gvisor:
        out.append(DoctorCheck("gvisor", "ok", f"gvisor isolation available (runtime {gvisor[0]})"))
    else:
        out.append(
            DoctorCheck(
                "gvisor",
                "warning",
                "gvisor isolation unavailable: install runsc",
                "install gVisor and register runsc in /etc/docker/daemon.json (agents asking for "
                "gvisor are refused, never downgraded)",
            )
        )
    kata = [r for r in KATA_RUNTIMES if r in runtimes]
    if kata:
        out.append(DoctorCheck("kata", "ok", f"micro_vm isolation available (runtime {kata[0]})"))
    else:
        out.append(
            DoctorCheck(
                "kata",
                "warning",
                "micro_vm isolation unavailable: install Kata Containers",
                "install kata-runtime and register it with Docker (agents asking for micro_vm are refused)",
            )
        )
    return out

"""One short command in a throwaway container of an image: no network, read-only, non-root, bounded.

Used to ask an image about itself (its Python, glibc and packages) and to check that an
agent's custom tools import there. What runs inside may be anyone's code, so it gets what a
sandbox gets and no more: no network, a read-only root, no capabilities, a small ``/tmp``,
memory, process and log caps, and a deadline; the container is removed in every case.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airlock.errors import ImageError, shorten

from ._dockerapi import docker_errors

__all__ = ["LABEL_THROWAWAY", "ThrowawayResult", "run_throwaway"]

#: Label on every throwaway container (its value: a fresh id), so a leftover one can be found.
LABEL_THROWAWAY = "airlock.throwaway"
#: Most bytes of output kept by the engine per stream (its log file is capped at this).
_LOG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ThrowawayResult:
    """How the command ended and what it wrote (each stream at most about 1 MiB)."""

    exit_code: int
    stdout: str
    stderr: str


async def run_throwaway(
    client: Any,
    image: str,
    argv: Sequence[str],
    *,
    timeout_s: float = 60.0,
    memory: str = "256m",
    what: str,
) -> ThrowawayResult:
    """Run ``argv`` (replacing the image's entrypoint) in a hardened container of ``image``.

    Raises:
        ImageError: the engine refused, or the command ran past ``timeout_s`` (``what``
            names the command in the message).
    """
    return await asyncio.to_thread(_run, client, image, list(argv), timeout_s, memory, what)


def _run(
    client: Any, image: str, argv: list[str], timeout_s: float, memory: str, what: str
) -> ThrowawayResult:
    import requests

    errors = docker_errors()
    container = None
    try:
        container = client.containers.create(
            image,
            entrypoint=argv[:1],
            command=argv[1:],
            user="65534:65534",
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=128,
            tmpfs={"/tmp": "rw,noexec,nosuid,size=16m"},
            environment={"HOME": "/tmp"},
            working_dir="/tmp",
            init=True,
            labels={LABEL_THROWAWAY: uuid.uuid4().hex[:12]},
            log_config={"type": "json-file", "config": {"max-size": str(_LOG_BYTES), "max-file": "1"}},
        )
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as e:
            raise ImageError(f"{what} in a container of {image} did not finish within {timeout_s:g}s") from e
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        return ThrowawayResult(int(status.get("StatusCode", -1)), stdout, stderr)
    except errors.ImageNotFound as e:
        raise ImageError(f"{what}: image {image} does not exist here") from e
    except errors.DockerException as e:
        raise ImageError(
            f"{what} in a container of {image}: Docker engine error: {shorten(str(e), 500)}"
        ) from e
    finally:
        if container is not None:
            _remove(container, errors, failing=sys.exc_info()[0] is not None)


def _remove(container: Any, errors: Any, *, failing: bool) -> None:
    """Remove the container; a failure is an error of its own unless one is already raised."""
    try:
        container.remove(force=True)
    except errors.NotFound:
        pass
    except errors.DockerException as e:
        if not failing:
            raise ImageError(f"cannot remove the throwaway container {container.id[:12]}: {e}") from e

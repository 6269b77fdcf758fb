"""Force-remove a container when another party may be removing it at the same moment.

Two controllers on one host (replicas, or a controller and ``airlock gc``) sweep the same
orphans; Docker answers the second ``remove`` with 409 "removal of container … is already in
progress". That is not a failure: the container is going. It is waited out (bounded) and
reported gone only once the engine says "no such container".
"""

from __future__ import annotations

import time
from typing import Any

from airlock.images import docker_errors

__all__ = ["force_remove"]

#: How long a removal started by someone else is waited for.
CONCURRENT_REMOVAL_S = 30.0


def force_remove(client: Any, container_id: str, *, wait_s: float = CONCURRENT_REMOVAL_S) -> bool:
    """Force-remove ``container_id`` (blocking) and return once it is gone: True when this call
    removed it, False when it was already gone or another party's removal finished it.

    Raises:
        docker.errors.DockerException: the engine refused, or a concurrent removal did not
            finish within ``wait_s``.
    """
    errors = docker_errors()
    try:
        client.api.remove_container(container_id, force=True)
        return True
    except errors.NotFound:
        return False
    except errors.APIError as e:
        if not _removal_in_progress(e):
            raise
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(container_id)
        except errors.NotFound:
            return False
        time.sleep(0.1)
    raise errors.APIError(f"container {container_id}: another removal did not finish in {wait_s:g}s")


def _removal_in_progress(e: Any) -> bool:
    return getattr(e, "status_code", None) == 409 and "already in progress" in str(e)

"""Force-remove a container when the engine is slow or another party removes it too.

Two controllers on one host (replicas, or a controller and ``airlock gc``) sweep the same
orphans; Docker answers the second ``remove`` with 409 "removal of container … is already in
progress". And a busy engine removing a gVisor sandbox that still reaps hundreds of processes
can take longer than the client's read timeout, while the removal goes on in the engine.
Neither is a failure: the container is going. Both are waited out (bounded), and the
container is reported gone only once the engine says "no such container".
"""

from __future__ import annotations

import time
from typing import Any

from airlock.images import docker_errors

__all__ = ["force_remove"]

#: How long a removal already under way (ours that timed out, or another party's) is waited for.
CONCURRENT_REMOVAL_S = 30.0


def force_remove(client: Any, container_id: str, *, wait_s: float | None = None) -> bool:
    """Force-remove ``container_id`` (blocking) and return once it is gone: True when this call
    removed it, False when it was already gone or a removal under way finished it.

    Raises:
        docker.errors.DockerException: the engine refused, or a removal under way did not
            finish within ``wait_s`` (default ``CONCURRENT_REMOVAL_S``).
    """
    import requests

    errors = docker_errors()
    try:
        client.api.remove_container(container_id, force=True)
        return True
    except errors.NotFound:
        return False
    except errors.APIError as e:
        if not _removal_in_progress(e):
            raise
    except requests.exceptions.ReadTimeout:
        pass  # the engine took longer than our read timeout; it goes on removing it
    except requests.RequestException as e:  # unreachable: the caller's retries handle that
        raise errors.DockerException(f"container {container_id}: {e}") from e
    return _wait_gone(client, container_id, CONCURRENT_REMOVAL_S if wait_s is None else wait_s)


def _wait_gone(client: Any, container_id: str, wait_s: float) -> bool:
    """False once the engine no longer knows ``container_id``; an error after ``wait_s``."""
    import requests

    errors = docker_errors()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(container_id)
        except errors.NotFound:
            return False
        except requests.exceptions.ReadTimeout:
            pass  # the engine is busy: ask again
        except requests.RequestException as e:
            raise errors.DockerException(f"container {container_id}: {e}") from e
        time.sleep(0.1)
    raise errors.APIError(f"container {container_id}: its removal did not finish in {wait_s:g}s")


def _removal_in_progress(e: Any) -> bool:
    return getattr(e, "status_code", None) == 409 and "already in progress" in str(e)

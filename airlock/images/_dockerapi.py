"""The one place that imports the Docker SDK (lazily: ``airlock.controller`` imports without it)."""

from __future__ import annotations

from typing import Any

from layer0 import EnvError

#: Connection pools the engine client keeps (see :func:`docker_client`).
_CONNECTION_POOLS = 512


def docker_client(timeout: int = 120) -> Any:
    """A ``docker.DockerClient`` from the environment (``DOCKER_HOST`` or the default socket).

    Raises:
        EnvError: ``provision_failed`` if the SDK is missing or the engine does not answer.
    """
    try:
        import docker
    except ImportError as e:  # pragma: no cover - depends on the install
        raise EnvError.provision_failed(
            "the Docker SDK is not installed: pip install 'airlock[controller]'"
        ) from e
    try:
        # One connection pool per request URL (docker-py's Unix-socket adapter): past
        # ``num_pools`` (25 by default) it closes the least recently used, even one a request
        # on another thread is still using. Many sandboxes at once (50 concurrent jobs, a warm
        # pool refilling) make more distinct URLs than that.
        client = docker.DockerClient(
            timeout=timeout, num_pools=_CONNECTION_POOLS, max_pool_size=16, **docker.utils.kwargs_from_env()
        )
        client.ping()
    except docker.errors.DockerException as e:
        raise EnvError.provision_failed(
            f"cannot reach the Docker engine ({e}); is dockerd running and DOCKER_HOST right?"
        ) from e
    return client


def docker_errors() -> Any:
    """The ``docker.errors`` module (for ``except`` clauses)."""
    import docker.errors

    return docker.errors

"""The backend registry: every backend's declaration, looked up by name.

Config validation asks it which isolation a backend provides and what it enforces; ``airlock
doctor`` asks it for each backend's checks; the run path asks it for a sandbox. Nothing
outside a backend names a backend class: a backend package exports one
:class:`~._backend.Backend`.
"""

from __future__ import annotations

from layer0 import EnvError

from . import docker, kubernetes, process
from ._declaration import Backend

__all__ = ["backend", "backend_names", "backends"]

#: The registered backends, in the order ``airlock doctor`` and error messages list them.
_BACKENDS: tuple[Backend, ...] = (docker.BACKEND, kubernetes.BACKEND, process.BACKEND)


def backends() -> tuple[Backend, ...]:
    """Every registered backend."""
    return _BACKENDS


def backend_names() -> tuple[str, ...]:
    """The registered backends' names."""
    return tuple(b.name for b in _BACKENDS)


def backend(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        EnvError: ``other`` for an unknown name (the message lists the known ones).
    """
    for b in _BACKENDS:
        if b.name == name:
            return b
    raise EnvError.other(f"unknown sandbox backend {name!r}; backends: {', '.join(backend_names())}")

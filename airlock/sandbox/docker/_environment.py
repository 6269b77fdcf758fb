"""DockerEnvironment: the Docker backend as a ``layer0.Environment``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airlock.policy import SidecarRoute
from airlock.sandbox._environment import SandboxEnvironment
from airlock.sandbox._events import SandboxEventSink

from ._backend import DockerBackend

__all__ = ["DockerEnvironment"]


class DockerEnvironment(SandboxEnvironment):
    """:class:`DockerBackend` as a ``layer0.Environment`` (``run(turn, input, spec)``).

    Args:
        sidecar_routes: upstream + header per sidecar credential name, over the built-in
            conventions (``anthropic-api-key``, ``openai-api-key``); ``run`` may add more.
        events: default sink for the turn's events (``run(..., events=)`` overrides).
        options: :class:`DockerBackend`'s arguments.
    """

    sandbox: DockerBackend

    def __init__(
        self,
        *,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
        events: SandboxEventSink | None = None,
        **options: Any,
    ) -> None:
        super().__init__(DockerBackend(**options), sidecar_routes=sidecar_routes, events=events)

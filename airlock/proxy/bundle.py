"""One sandbox's proxies in one process: the egress proxy plus its credential proxies.

A Docker (or Kubernetes) backend runs ``python -m airlock.proxy bundle --config FILE`` in a
single container beside the sandbox instead of one container per proxy. ``FILE`` is a
:class:`BundleConfig` as JSON, written by the controller into a directory only the proxy
container mounts; it names the egress plan, each credential proxy's route and the file that
holds its secret (secrets are never in the config, argv or the environment).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import TracebackType
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from airlock.policy.plan import EgressPlan, SidecarRoute

from ._clients import ClientFilter
from ._events import ProxyEventSink
from ._listen import EVERY_FAMILY
from .credentials import CredentialProxy
from .egress import EgressProxy

__all__ = ["EVERY_FAMILY", "BundleConfig", "CredentialListener", "ProxyBundle"]


class CredentialListener(BaseModel):
    """One credential proxy of the bundle."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The credential's name (for events).
    credential: str
    route: SidecarRoute
    port: int = Field(ge=0, lt=65536)
    #: Path (inside the proxy container) of the file holding the secret.
    secret_file: str


class BundleConfig(BaseModel):
    """What a proxy bundle runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Address to listen on: ``0.0.0.0`` (every IPv4 interface of the container; see
    #: ``clients``), or ``*`` for every address family (``::`` and ``0.0.0.0`` on one port,
    #: IPv4 alone where the host has no IPv6), as a pod whose IP may be IPv6 needs.
    host: str = "0.0.0.0"
    #: The egress proxy's port (None: no egress proxy, credential proxies only).
    egress_port: int | None = Field(default=3128, ge=0, lt=65536)
    plan: EgressPlan = Field(default_factory=EgressPlan)
    credentials: tuple[CredentialListener, ...] = ()
    #: CIDRs of the peers allowed to connect (the sandbox's network); empty: any.
    clients: tuple[str, ...] = ()
    #: Event sinks (``stdout``, ``file:P``, ``unix:P``).
    events: tuple[str, ...] = ("stdout",)


class ProxyBundle:
    """Starts and stops the proxies a :class:`BundleConfig` describes (an async context manager)."""

    def __init__(self, config: BundleConfig, sink: ProxyEventSink) -> None:
        self.config = config
        self._sink = sink
        self._proxies: list[EgressProxy | CredentialProxy] = []
        #: The secrets read at start (for redaction by the caller's sinks).
        self.secrets: tuple[str, ...] = ()

    @staticmethod
    def read_secrets(config: BundleConfig) -> tuple[str, ...]:
        """Read every credential's secret file (blocking; call before starting).

        Raises:
            ValueError: a secret file is unreadable or empty.
        """
        values = []
        for c in config.credentials:
            try:
                value = Path(c.secret_file).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as e:
                raise ValueError(f"cannot read the secret of {c.credential}: {e.strerror}") from e
            if not value:
                raise ValueError(f"the secret of {c.credential} is empty")
            values.append(value)
        return tuple(values)

    async def start(self, secrets: tuple[str, ...]) -> list[tuple[str, str, int]]:
        """Listen; return ``(what, host, port)`` per proxy."""
        config = self.config
        clients = ClientFilter(config.clients)
        bound: list[tuple[str, str, int]] = []
        try:
            if config.egress_port is not None:
                egress = EgressProxy(config.plan, self._sink, clients=clients)
                self._proxies.append(egress)
                host, port = await egress.start(config.host, config.egress_port)
                bound.append(("egress", host, port))
            for listener, secret in zip(config.credentials, secrets, strict=True):
                proxy = CredentialProxy(
                    listener.route,
                    secret,
                    self._sink,
                    credential=listener.credential,
                    clients=clients,
                    plan=config.plan,
                )
                self._proxies.append(proxy)
                host, port = await proxy.start(config.host, listener.port)
                bound.append((f"credentials {listener.credential}", host, port))
        except BaseException:
            await self.aclose()
            raise
        self.secrets = secrets
        return bound

    async def aclose(self) -> None:
        """Stop every proxy."""
        proxies, self._proxies = self._proxies, []
        for p in proxies:
            with contextlib.suppress(Exception):
                await p.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

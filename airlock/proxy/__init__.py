"""airlock.proxy: the egress proxy and the credential proxy (sidecar) that airlock runs beside a sandbox.

Both run outside the sandbox, in a container from the runner image, started as
``python -m airlock.proxy egress ...`` / ``python -m airlock.proxy credentials ...``
(see ``airlock/proxy/__main__.py``), or in-process via :class:`EgressProxy` and
:class:`CredentialProxy`. Their decisions are JSON-line events (:class:`EgressEvent`,
:class:`CredentialProxyEvent`).
"""

from ._events import (
    PROXY_EVENT,
    CredentialProxyEvent,
    EgressEvent,
    LineSink,
    MemorySink,
    MultiSink,
    ProxyEvent,
    ProxyEventSink,
)
from ._listen import host_port_text
from .credentials import CredentialProxy
from .egress import Connector, EgressProxy, Resolver, system_resolver

__all__ = [
    "PROXY_EVENT",
    "Connector",
    "CredentialProxy",
    "CredentialProxyEvent",
    "EgressEvent",
    "EgressProxy",
    "LineSink",
    "MemorySink",
    "MultiSink",
    "ProxyEvent",
    "ProxyEventSink",
    "Resolver",
    "host_port_text",
    "system_resolver",
]

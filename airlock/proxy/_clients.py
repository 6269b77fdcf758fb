"""Which peers may use a proxy: only the sandbox's own network.

A proxy container sits on two kinds of network: the sandbox's internal network and one or
more egress networks. It listens on all of them (it cannot know in advance which interface
is which), so every connection's peer address is checked against the internal network's
subnet and anything else is closed before a byte is read: another container on an egress
network can use neither the egress proxy nor a credential proxy.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from airlock.policy.decision import IPNetwork

__all__ = ["ClientFilter"]


class ClientFilter:
    """Admits peers whose address lies in one of ``networks`` (empty: everyone)."""

    def __init__(self, networks: Iterable[str] = ()) -> None:
        self.networks: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n, strict=False) for n in networks)

    def admits(self, peer: object) -> bool:
        """Whether ``peer`` (a socket peername tuple) may talk to the proxy."""
        if not self.networks:
            return True
        if not isinstance(peer, tuple) or not peer:
            return False
        try:
            ip = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == n.version and ip in n for n in self.networks)

"""This pod's own IP, in the family of the cluster's network (IPv4, IPv6 or dual-stack).

The kubelet maps the pod's hostname to its IPs in ``/etc/hosts`` (both on a dual-stack
cluster), so every family's address is found with ``getaddrinfo``, never the IPv4-only
``gethostbyname``. When there are several, the family of the API server's in-cluster address
(``KUBERNETES_SERVICE_HOST``: the cluster's primary service family) is preferred, since the
pods that must reach this one are on that network; without it, IPv4 first. Loopback,
link-local and unspecified addresses are never chosen.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable

__all__ = ["choose_address", "own_pod_address"]

_SERVICE_HOST = "KUBERNETES_SERVICE_HOST"


def choose_address(candidates: Iterable[str], prefer_version: int | None) -> str | None:
    """The first usable address of ``candidates`` in IP version ``prefer_version``, else the
    first usable one (IPv4 before IPv6 when no version is preferred); None when none is."""
    usable: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for text in candidates:
        try:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            continue
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip in usable:
            continue
        usable.append(ip)
    if not usable:
        return None
    order = prefer_version or 4
    usable.sort(key=lambda ip: ip.version != order)  # stable: the resolver's order within a family
    return str(usable[0])


def _version_of(host: str | None) -> int | None:
    try:
        return ipaddress.ip_address((host or "").strip("[]")).version
    except ValueError:
        return None


def own_pod_address() -> str | None:
    """This pod's IP for other pods to reach (blocking: call it from a thread); None when the
    hostname resolves to no usable address."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    found = [str(info[4][0]) for info in infos]
    return choose_address(found, _version_of(os.environ.get(_SERVICE_HOST)))

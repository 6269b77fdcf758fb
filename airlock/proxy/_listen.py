"""Where a proxy listens: one address, or every address family of the host.

A proxy in a Kubernetes pod is reached at the pod's IP, which is an IPv6 address on an
IPv6-only or IPv6-primary cluster: binding ``0.0.0.0`` alone would refuse every sandbox
there. :data:`EVERY_FAMILY` (``"*"``) binds both families on one port: a single dual-stack
``::`` socket where the OS allows it (Linux, unless ``IPV6_V6ONLY`` is forced), else a
``::`` socket and a ``0.0.0.0`` socket on the same port, else (a host or pod without IPv6)
``0.0.0.0`` alone. IPv4 peers of a dual-stack socket show as ``::ffff:a.b.c.d``;
:func:`peer_text` prints them as the IPv4 address they are.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

__all__ = ["EVERY_FAMILY", "bind_every_family", "host_port_text", "peer_text"]

#: The host that means "every address family this host has" (``::`` and ``0.0.0.0``).
EVERY_FAMILY = "*"
_BACKLOG = 128


def bind_every_family(port: int) -> list[socket.socket]:
    """Listening sockets on ``port`` (0: one free port for all) for every family the host has.

    Raises:
        OSError: the port cannot be bound (taken, or no family could be bound at all).
    """
    v6 = _socket(socket.AF_INET6)
    if v6 is None:
        return [_listening(_bound(socket.AF_INET, "0.0.0.0", port))]
    try:
        dual = _dual_stack(v6)
        v6.bind(("::", port))
    except OSError as e:
        v6.close()
        if e.errno == errno.EADDRINUSE:
            raise
        return [_listening(_bound(socket.AF_INET, "0.0.0.0", port))]  # IPv6 is off here
    sockets = [_listening(v6)]
    if not dual:
        try:
            sockets.append(_listening(_bound(socket.AF_INET, "0.0.0.0", int(v6.getsockname()[1]))))
        except OSError:
            v6.close()
            raise
    return sockets


def _socket(family: socket.AddressFamily) -> socket.socket | None:
    """A non-blocking TCP socket with ``SO_REUSEADDR`` (None: this kernel lacks the family)."""
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setblocking(False)
    return sock


def _dual_stack(sock: socket.socket) -> bool:
    """Ask an IPv6 socket to accept IPv4 peers too; whether the OS agreed."""
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    except OSError:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        return False
    return sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0


def _bound(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    sock = _socket(family)
    if sock is None:
        raise OSError(errno.EAFNOSUPPORT, f"no {family.name} sockets on this host")
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _listening(sock: socket.socket) -> socket.socket:
    sock.listen(_BACKLOG)
    return sock


def host_port_text(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:3128``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def peer_text(peer: object) -> str:
    """A socket peer as ``ip:port`` (``[ip]:port`` for IPv6; an IPv4-mapped peer as IPv4)."""
    if not isinstance(peer, tuple) or len(peer) < 2:
        return "?"
    host = str(peer[0])
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host_port_text(host, int(peer[1]))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        host = str(ip.ipv4_mapped)
    return host_port_text(host, int(peer[1]))

"""Whether this machine can run the IPv6 tests: a kernel with IPv6 and ``::1`` on loopback.

Every IPv6 test talks only to servers it starts itself on ``::1`` (or, with Docker, on a
network with a ULA subnet it created); none runs where ``::1`` cannot be bound, and the skip
says why.
"""

from __future__ import annotations

import socket

import pytest

__all__ = ["IPV6_LOOPBACK", "ipv6_loopback_missing", "needs_ipv6_loopback"]

IPV6_LOOPBACK = "::1"


def ipv6_loopback_missing() -> str | None:
    """Why ``::1`` cannot be used here (None: it can)."""
    if not socket.has_ipv6:
        return "this Python was built without IPv6 (socket.has_ipv6 is False)"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind((IPV6_LOOPBACK, 0))
    except OSError as e:
        return f"cannot bind [::1] on this machine (no IPv6 on loopback: {e.strerror or e})"
    return None


#: Skips a test (with the reason) where ``::1`` is unusable.
needs_ipv6_loopback = pytest.mark.skipif(
    ipv6_loopback_missing() is not None, reason=str(ipv6_loopback_missing())
)

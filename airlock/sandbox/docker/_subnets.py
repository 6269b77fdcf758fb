"""Small subnets for the per-sandbox internal networks, taken from one configured range.

Docker's default address pools hand each new network a /16 or a /20 out of a few dozen: about
30 networks fit on a host, and the next sandbox with egress failed (``could not find an
available, non-overlapping IPv4 address pool``). Each internal network instead gets a /28
(``backends.docker.internal_prefix``) of ``backends.docker.internal_subnets``
(``10.213.0.0/16``: 4096 of them), passed to ``networks.create`` as explicit IPAM config. A
/28 is 16 addresses; the network and broadcast addresses and the gateway Docker reserves even
with ``inhibit_ipv4`` leave 13 for the sandbox and the proxy. A /29 leaves 5; in a /30 the
second container fails to start (measured), hence at most /29.

A subnet is free when it overlaps no Docker network's subnet (any network, not only ours), no
route of the host but the default one, and no address of the host (read from ``/proc``, no
traffic): a sandbox network must never shadow a destination the proxy should reach. A random
free one is taken (two processes rarely pick the same one); when another creator took it
meanwhile, Docker refuses with ``Pool overlaps`` and the next one is tried. While the range is
full the sandbox waits (``backends.docker.internal_subnet_wait``) for one to be freed, then
fails with ``provision_failed`` before anything else of it exists.

The arithmetic and the parsers are pure; :func:`allocate`, :func:`docker_subnets` and
:func:`host_networks` read the engine or the host (blocking).
"""

from __future__ import annotations

import logging
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, ip_network
from pathlib import Path
from typing import Any, TypeVar

from airlock.images import docker_errors
from layer0 import EnvError

from ._labels import LABEL_SANDBOX

__all__ = [
    "MAX_PREFIX",
    "PRIVATE_RANGES",
    "Capacity",
    "Claim",
    "DockerSubnet",
    "allocate",
    "capacity",
    "conflicts",
    "docker_subnets",
    "free_runs",
    "host_networks",
    "parse_local_addresses",
    "parse_range",
    "parse_routes",
    "pick",
]

_log = logging.getLogger("airlock.sandbox.docker.subnets")
_T = TypeVar("_T")

#: The smallest subnet that holds the sandbox and the proxy beside the reserved addresses.
MAX_PREFIX = 29
#: The ranges a configured range must lie in (RFC 1918).
PRIVATE_RANGES = tuple(IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


@dataclass(frozen=True)
class Claim:
    """A network that takes some addresses: a Docker network's subnet, a host route or address."""

    network: IPv4Network
    what: str


# -- pure ---------------------------------------------------------------------------------


def parse_range(text: str) -> IPv4Network:
    """The configured range: an IPv4 network (no host bits set) inside an RFC 1918 range.

    Raises:
        ValueError: what is wrong with it.
    """
    try:
        network = ip_network(text.strip(), strict=True)
    except ValueError as e:
        raise ValueError(f"not an IPv4 network in CIDR notation ({e})") from None
    if not isinstance(network, IPv4Network):
        raise ValueError("an IPv4 network is needed")
    if not any(network.subnet_of(p) for p in PRIVATE_RANGES):
        raise ValueError(
            f"{network} is not private: use a range inside {', '.join(map(str, PRIVATE_RANGES))}"
        )
    return network


def _span(network: IPv4Network) -> tuple[int, int]:
    return int(network.network_address), int(network.broadcast_address) + 1


def free_runs(pool: IPv4Network, prefix: int, used: Iterable[IPv4Network]) -> list[tuple[int, int]]:
    """The free ``/prefix`` blocks of ``pool`` as runs ``(first address as int, block count)``:
    every block that overlaps a network of ``used`` is taken."""
    size = 1 << (32 - prefix)
    lo, hi = _span(pool)
    spans = []
    for network in used:
        start, end = _span(network)
        start, end = max(start, lo), min(end, hi)
        if start < end:  # widened to whole blocks
            spans.append((lo + (start - lo) // size * size, lo + -(-(end - lo) // size) * size))
    runs = []
    cursor = lo
    for start, end in sorted(spans):
        if start > cursor:
            runs.append((cursor, (start - cursor) // size))
        cursor = max(cursor, end)
    if cursor < hi:
        runs.append((cursor, (hi - cursor) // size))
    return runs


@dataclass(frozen=True)
class Capacity:
    """How many ``/prefix`` subnets ``pool`` holds, and how many are free."""

    pool: IPv4Network
    prefix: int
    total: int
    free: int

    @property
    def in_use(self) -> int:
        """Subnets that overlap something (a network, a route, an address)."""
        return self.total - self.free


def capacity(pool: IPv4Network, prefix: int, used: Iterable[IPv4Network]) -> Capacity:
    """How many ``/prefix`` subnets of ``pool`` are free beside ``used``."""
    free = sum(count for _, count in free_runs(pool, prefix, used))
    return Capacity(pool, prefix, 1 << (prefix - pool.prefixlen), free)


def pick(pool: IPv4Network, prefix: int, used: Iterable[IPv4Network], index: int = 0) -> IPv4Network | None:
    """The ``index``-th free ``/prefix`` subnet of ``pool`` (modulo the free count; None: full)."""
    runs = free_runs(pool, prefix, used)
    free = sum(count for _, count in runs)
    if not free:
        return None
    index %= free
    for start, count in runs:
        if index < count:
            return IPv4Network((start + index * (1 << (32 - prefix)), prefix))
        index -= count
    raise AssertionError("unreachable")


def _hex_address(field: str) -> IPv4Address:
    return IPv4Address(socket.inet_ntoa(struct.pack("<I", int(field, 16))))


def parse_routes(text: str) -> list[Claim]:
    """The routes of ``/proc/net/route`` but the default one (it overlaps everything)."""
    claims = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            destination, mask = _hex_address(fields[1]), _hex_address(fields[7])
            network = IPv4Network(f"{destination}/{mask}", strict=False)
        except (ValueError, struct.error):
            continue
        if network.prefixlen:
            claims.append(Claim(network, f"host route {network} dev {fields[0]}"))
    return claims


def parse_local_addresses(text: str) -> list[Claim]:
    """The host's own addresses (``/32 host LOCAL`` leaves of ``/proc/net/fib_trie``)."""
    found: dict[IPv4Address, Claim] = {}
    leaf: IPv4Address | None = None
    for line in text.splitlines():
        token = line.strip()
        if token.startswith("|--"):
            try:
                leaf = IPv4Address(token[3:].strip())
            except ValueError:
                leaf = None
        elif leaf is not None and token.startswith("/32 host LOCAL"):
            found.setdefault(leaf, Claim(IPv4Network(leaf), f"host address {leaf}"))
    return list(found.values())


@dataclass(frozen=True)
class DockerSubnet:
    """One IPv4 subnet of a Docker network; ``ours`` for a sandbox's internal network."""

    name: str
    network: IPv4Network
    ours: bool


def conflicts(pool: IPv4Network, subnets: Sequence[DockerSubnet], host: Sequence[Claim]) -> list[Claim]:
    """What in ``pool`` is not a sandbox's network: other Docker networks, host routes and
    addresses (Docker's own bridges, the routes and addresses of its networks, left out)."""
    docker = [s.network for s in subnets]
    found = [Claim(s.network, f"Docker network {s.name} ({s.network})") for s in subnets if not s.ours]
    found += [c for c in host if not any(c.network.subnet_of(d) for d in docker)]
    return [c for c in found if c.network.overlaps(pool)]


# -- the host and the engine (blocking) ---------------------------------------------------


def host_networks(
    route: Path = Path("/proc/net/route"), fib: Path = Path("/proc/net/fib_trie")
) -> list[Claim]:
    """The host's routes (but the default one) and addresses; what cannot be read is left out."""
    claims = []
    for path, parse in ((route, parse_routes), (fib, parse_local_addresses)):
        try:
            claims += parse(path.read_text(encoding="ascii", errors="replace"))
        except OSError:
            continue
    return claims


def docker_subnets(client: Any) -> list[DockerSubnet]:
    """Every IPv4 subnet of every Docker network (one ``GET /networks``)."""
    found = []
    for n in client.networks.list():
        attrs = n.attrs or {}
        ours = LABEL_SANDBOX in (attrs.get("Labels") or {})
        for cfg in (attrs.get("IPAM") or {}).get("Config") or []:
            try:
                network = ip_network(str(cfg.get("Subnet") or ""), strict=False)
            except ValueError:
                continue
            if isinstance(network, IPv4Network):
                found.append(DockerSubnet(str(attrs.get("Name") or n.name), network, ours))
    return found


#: Subnets this process is creating a network on right now (not yet listed by the engine).
_reserved: set[IPv4Network] = set()
_lock = threading.Lock()


def allocate(
    client: Any,
    pool: IPv4Network,
    prefix: int,
    create: Callable[[IPv4Network], _T],
    *,
    wait: float,
    what: str,
    cancelled: Callable[[], bool] = lambda: False,
    poll: float = 0.25,
    host: Callable[[], list[Claim]] | None = None,
) -> tuple[_T, IPv4Network]:
    """``create(subnet)`` on a free ``/prefix`` subnet of ``pool``; ``(its result, the subnet)``.

    ``create`` raising Docker's ``Pool overlaps`` error (another creator took the subnet)
    tries another. While none is free, waits up to ``wait`` seconds (polling every ``poll``,
    stopping early when ``cancelled()``). ``host``: the host's routes and addresses
    (default :func:`host_networks`).

    Raises:
        EnvError: ``provision_failed`` when no subnet became free in time; whatever
            ``create`` raises but an overlap.
    """
    errors = docker_errors()
    deadline = time.monotonic() + wait
    refused: set[IPv4Network] = set()  # Docker says these overlap something we cannot see
    waiting = False
    while True:
        subnet, used = _reserve(client, pool, prefix, refused, host or host_networks)
        if subnet is None:
            if cancelled():
                raise EnvError.provision_failed(f"{what}: cancelled while waiting for a free internal subnet")
            if time.monotonic() >= deadline:
                raise _exhausted(what, pool, prefix, used, len(refused), wait)
            if not waiting:
                waiting = True
                _log.info("%s: all /%d subnets of %s in use; waiting up to %.0fs", what, prefix, pool, wait)
            time.sleep(poll)
            continue
        try:
            return create(subnet), subnet
        except errors.APIError as e:
            if "overlaps" not in str(e.explanation or e).lower():
                raise
            _log.debug("%s: subnet %s taken meanwhile (%s); trying another", what, subnet, e.explanation)
            refused.add(subnet)
        finally:
            with _lock:
                _reserved.discard(subnet)


def _reserve(
    client: Any,
    pool: IPv4Network,
    prefix: int,
    refused: set[IPv4Network],
    host: Callable[[], list[Claim]],
) -> tuple[IPv4Network | None, list[IPv4Network]]:
    """A free subnet, reserved for this process until released (None: none is free), and
    what was in use when it was picked."""
    with _lock:
        used = [s.network for s in docker_subnets(client)]
        used += [c.network for c in host()]
        used += [*_reserved, *refused]
        subnet = pick(pool, prefix, used, random.getrandbits(32))
        if subnet is not None:
            _reserved.add(subnet)
    return subnet, used


def _exhausted(
    what: str, pool: IPv4Network, prefix: int, used: list[IPv4Network], refused: int, wait: float
) -> EnvError:
    """The error of a pool with no free subnet after ``wait`` seconds."""
    cap = capacity(pool, prefix, used)
    seen = f", {refused} refused by Docker as overlapping" if refused else ""
    waited = f" after waiting {wait:.0f}s" if wait > 0 else ""
    return EnvError.provision_failed(
        f"{what}: no free /{prefix} left in {pool} ({cap.in_use} in use{seen}){waited}; "
        "raise backends.docker.internal_subnets or lower concurrency"
    )

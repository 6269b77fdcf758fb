"""The egress decision: one pure function shared by every proxy and backend.

``decide(plan, host, port, resolved)`` answers whether a connection from the sandbox to
``host:port`` may go out, given the IPs the proxy resolved for ``host``. It sends no
traffic and resolves nothing: the caller resolves once, asks, and then connects to an
IP it asked about (never re-resolving), so a name that re-resolves to a private address
between check and use (DNS rebinding) cannot slip through.

``precheck(plan, host, port)`` denies before any DNS lookup unless a name rule allows the
name (or the default is allow), so a denied name is never resolved: no data leaks out
through DNS queries, and a CIDR rule admits IP literals only, never names.

Semantics (the single meaning the Docker and Kubernetes backends share):

1. The host is normalised (lower case, no trailing dot, no IPv6 brackets). An IP literal
   host is checked as itself; the resolved list is ignored for it. IPv4-mapped IPv6
   addresses (``::ffff:10.0.0.1``) are checked as the IPv4 address they carry.
2. Every resolved IP is checked; the connection is allowed only if **all** of them are
   (one private answer among public ones denies the name).
3. A name (not an IP literal) is considered at all only when a name rule (exact, wildcard
   or ``*``) allows it on that port, or the default is allow. A CIDR rule admits IP
   literals, never names: a sandbox cannot have an arbitrary name resolved (DNS
   exfiltration) because some CIDR rule matches the port.
4. Per IP: a matching **deny** rule wins (a domain rule matches the name, a CIDR rule the
   IP; the port must match when the rule names one). Otherwise a matching **allow** rule
   grants it, except that an IP in a *special range* (private, shared/CGNAT, loopback,
   link-local incl. the 169.254.169.254 metadata address, multicast, unspecified,
   reserved, documentation, IPv6 ULA/link-local/multicast, NAT64/6to4/Teredo) is granted
   **only by a CIDR rule that lies inside that special range** (``10.0.0.0/8``,
   ``169.254.169.254/32``). A domain rule — exact or wildcard — never grants a special
   address, and neither does the default. Otherwise the plan's default applies.
5. An in-cluster **Service** rule (:mod:`airlock.policy.cluster`) is a name rule for that
   Service's names only: a short form (``NAME.NS``, ``NAME.NS.svc``, ``NAME`` in the
   sandbox's namespace) is decided as the full ``NAME.NS.svc.<cluster domain>``, which
   :func:`lookup_name` tells the proxy to resolve. It grants the private, CGNAT and
   unique-local addresses that name resolves to, on its port; never loopback, link-local
   or the metadata address, and no other name.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Address ranges denied unless a CIDR rule inside them names them (label, network).
SPECIAL_RANGES: tuple[tuple[str, IPNetwork], ...] = tuple(
    (label, ipaddress.ip_network(net))
    for label, net in (
        ("unspecified / this network", "0.0.0.0/8"),
        ("private", "10.0.0.0/8"),
        ("shared address space (CGNAT)", "100.64.0.0/10"),
        ("loopback", "127.0.0.0/8"),
        ("link-local / cloud metadata", "169.254.0.0/16"),
        ("private", "172.16.0.0/12"),
        ("IETF protocol assignments", "192.0.0.0/24"),
        ("documentation", "192.0.2.0/24"),
        ("private", "192.168.0.0/16"),
        ("benchmarking", "198.18.0.0/15"),
        ("documentation", "198.51.100.0/24"),
        ("documentation", "203.0.113.0/24"),
        ("multicast", "224.0.0.0/4"),
        ("reserved / broadcast", "240.0.0.0/4"),
        ("unspecified", "::/128"),
        ("loopback", "::1/128"),
        ("IPv4-mapped", "::ffff:0:0/96"),
        ("NAT64", "64:ff9b::/96"),
        ("NAT64 local-use", "64:ff9b:1::/48"),
        ("discard-only", "100::/64"),
        ("Teredo", "2001::/32"),
        ("documentation", "2001:db8::/32"),
        ("6to4", "2002::/16"),
        ("unique local (private)", "fc00::/7"),
        ("link-local", "fe80::/10"),
        ("site-local (deprecated)", "fec0::/10"),
        ("multicast", "ff00::/8"),
    )
)


class RuleView(Protocol):
    """What the decision reads of one rule (:class:`airlock.policy.plan.EgressRule` is one).

    A protocol, so this module needs nothing of :mod:`.plan` (which imports it).
    """

    @property
    def action(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def label(self) -> str: ...

    def matches(
        self, name: str | None, port: int, ip: IPAddress | None, *, cluster_domain: str = ...
    ) -> bool: ...

    def names_special(self, special: IPNetwork) -> bool: ...

    def specificity(self) -> tuple[int, int, bool]: ...


class PlanView(Protocol):
    """What the decision reads of a plan (:class:`airlock.policy.plan.EgressPlan` is one)."""

    @property
    def default(self) -> str: ...

    @property
    def rules(self) -> Sequence[RuleView]: ...

    @property
    def cluster_domain(self) -> str: ...

    def service_name(self, host: str) -> str | None: ...

    def service_forms(self, host: str) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Decision:
    """The answer for one connection attempt."""

    #: Whether the connection may go out.
    allowed: bool
    #: Label of the rule that decided (``"default deny"`` / ``"default allow"`` when none did).
    rule: str
    #: One line a user can read: why.
    reason: str
    #: The checked IPs, in the order the proxy should try them (empty when denied before resolving).
    ips: tuple[str, ...] = ()


def normalise_host(host: str) -> str:
    """Lower-case ``host`` and drop a trailing dot and IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.rstrip(".")


def parse_ip(text: str) -> IPAddress | None:
    """``text`` as an IP address (IPv4-mapped IPv6 unwrapped to IPv4), or None if it is a name."""
    try:
        ip = ipaddress.ip_address(normalise_host(text).split("%", 1)[0])
    except ValueError:
        return None
    return unwrap(ip)


def unwrap(ip: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address as its IPv4 address; any other address unchanged."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def net_within(inner: IPNetwork, outer: IPNetwork) -> bool:
    """Whether network ``inner`` lies inside ``outer`` (False across IP versions)."""
    if isinstance(inner, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return inner.subnet_of(outer)
    if isinstance(inner, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return inner.subnet_of(outer)
    return False


def net_overlap(a: IPNetwork, b: IPNetwork) -> bool:
    """Whether networks ``a`` and ``b`` share an address (False across IP versions)."""
    return a.version == b.version and (net_within(a, b) or net_within(b, a))


def special_range(ip: IPAddress) -> tuple[str, IPNetwork] | None:
    """The special range ``ip`` lies in (label, network), or None for a public address."""
    ip = unwrap(ip)
    for label, net in SPECIAL_RANGES:
        if net.version == ip.version and ip in net:
            return label, net
    return None


def lookup_name(plan: PlanView, host: str) -> str:
    """The name a proxy resolves for ``host``: an allowed Service's full name, absolute (a
    trailing dot: never through the resolver's search list), else ``host`` itself."""
    full = plan.service_name(host)
    return f"{full}." if full is not None else host


def decide(plan: PlanView, host: str, port: int, resolved: Sequence[IPAddress | str]) -> Decision:
    """Decide whether ``host:port`` (resolved to ``resolved``) may be reached under ``plan``.

    Args:
        plan: The compiled egress plan.
        host: The requested host: a name or an IP literal (brackets allowed).
        port: The requested TCP port.
        resolved: The addresses the caller resolved ``host`` to (ignored for IP literals).

    Returns:
        A Decision; when allowed, ``ips`` lists the checked addresses to connect to.
    """
    name = normalise_host(host)
    literal = parse_ip(name)
    if not 0 < port < 65536:
        return Decision(False, "invalid request", f"port {port} is out of range")
    if literal is not None:
        ips: list[IPAddress] = [literal]
        name_for_rules: str | None = None
    else:
        if not name:
            return Decision(False, "invalid request", "empty host")
        forms = plan.service_forms(name)
        for form in forms[1:]:  # a deny rule written for a short form of the Service's name
            if (denied := _name_denied(plan, form, port)) is not None:
                return denied
        name = forms[0] if forms else name
        name_for_rules = name
        ips = []
        for item in resolved:
            ip = parse_ip(item) if isinstance(item, str) else unwrap(item)
            if ip is None:
                return Decision(False, "invalid request", f"resolver returned a non-address {item!r}")
            if ip not in ips:
                ips.append(ip)
        if not ips:
            return Decision(False, "no address", f"{name} did not resolve to any address")
        if plan.default != "allow" and not _name_admitted(plan, name, port):
            return _unnamed(name, port, resolved=True)
    granted: Decision | None = None
    for ip in ips:
        one = _decide_ip(plan, name_for_rules, port, ip)
        if not one.allowed:
            return Decision(False, one.rule, one.reason, ())
        granted = granted or one
    assert granted is not None
    return Decision(True, granted.rule, granted.reason, tuple(str(ip) for ip in ips))


def precheck(plan: PlanView, host: str, port: int) -> Decision | None:
    """The decision when it needs no DNS lookup, or None when ``host`` must be resolved first.

    IP literals (and invalid requests) are decided fully here. A name is resolved only when a
    *name* rule (exact, wildcard or ``*``) allows it on this port, or the plan's default is
    allow; otherwise it is denied here. A CIDR rule admits IP literals, never an arbitrary
    name: a proxy calling this before resolving never looks up a name no rule names, so no
    data leaves in DNS queries (``CONNECT <data>.attacker.example:443`` is refused unresolved).
    """
    name = normalise_host(host)
    if parse_ip(name) is not None or not 0 < port < 65536 or not name:
        return decide(plan, name, port, [])
    forms = plan.service_forms(name) or (name,)  # a Service: in full first, then each short form
    for form in forms:
        if (denied := _name_denied(plan, form, port)) is not None:
            return denied
    name = forms[0]
    if plan.default == "allow" or _name_admitted(plan, name, port):
        return None
    return _unnamed(name, port, resolved=False)


def _name_denied(plan: PlanView, name: str, port: int) -> Decision | None:
    """The refusal when a name deny rule (exact, wildcard or ``*``) covers ``name:port``."""
    for rule in plan.rules:
        if rule.action == "deny" and rule.kind != "cidr" and _matches(plan, rule, name, port, None):
            return Decision(False, rule.label(), f"{name}:{port} matches deny rule {rule.label()}")
    return None


def _name_admitted(plan: PlanView, name: str, port: int) -> bool:
    """Whether a name allow rule (exact, wildcard or ``*``) covers ``name:port``."""
    return any(
        r.action == "allow" and r.kind != "cidr" and _matches(plan, r, name, port, None) for r in plan.rules
    )


def _matches(plan: PlanView, rule: RuleView, name: str | None, port: int, ip: IPAddress | None) -> bool:
    return rule.matches(name, port, ip, cluster_domain=plan.cluster_domain)


def _unnamed(name: str, port: int, *, resolved: bool) -> Decision:
    """The denial of a name no name rule allows."""
    when = "" if resolved else "; not resolved"
    why = f"no name rule allows it, and a CIDR rule admits IP literals only (default deny{when})"
    return Decision(False, "default deny", f"{name}:{port} denied: {why}")


def _decide_ip(plan: PlanView, name: str | None, port: int, ip: IPAddress) -> Decision:
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    target = f"{name}:{port} ({ip})" if name else f"{literal}:{port}"
    for rule in plan.rules:
        if rule.action == "deny" and _matches(plan, rule, name, port, ip):
            return Decision(False, rule.label(), f"{target} matches deny rule {rule.label()}")
    special = special_range(ip)
    blocked_by_special: RuleView | None = None
    best: RuleView | None = None
    for rule in plan.rules:
        if rule.action != "allow" or not _matches(plan, rule, name, port, ip):
            continue
        if special is not None and not rule.names_special(special[1]):
            blocked_by_special = blocked_by_special or rule
            continue
        if best is None or rule.specificity() > best.specificity():
            best = rule
    if best is not None:
        return Decision(True, best.label(), f"{target} allowed by {best.label()}")
    if special is not None:
        label, net = special
        why = f"{ip} is in a {label} range ({net}); only a CIDR rule inside that range can allow it"
        via = f" (matched {blocked_by_special.label()}, which cannot grant it)" if blocked_by_special else ""
        return Decision(False, f"deny special {net}", f"{target} denied: {why}{via}")
    if plan.default == "allow":
        return Decision(True, "default allow", f"{target} allowed by the default (allow)")
    return Decision(False, "default deny", f"{target} denied: no rule allows it (default deny)")

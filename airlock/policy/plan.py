"""One policy model: an EnvironmentSpec's network and credential parts as an inspectable plan.

``compile_plan(spec)`` turns ``spec.network``, the ``network_policy`` isolation rules and
``spec.credentials`` into a backend-neutral :class:`SandboxPlan`. Docker and Kubernetes
render the same plan (networks, proxy, mounts, env), and ``airlock agents show`` prints it
with :meth:`SandboxPlan.render_text` or the row data of :meth:`SandboxPlan.egress_rows` /
:meth:`SandboxPlan.credential_rows`. Everything unsafe or contradictory is rejected here,
at configuration time, with every problem listed in one :class:`PolicyError`.

Network meaning (enforced by the egress proxy with ``decide`` in :mod:`airlock.policy.decision`):

- **Default deny.** No ``spec.network`` means deny all egress. ``network_policy`` isolation
  rules add to ``spec.network.rules``; the default comes from ``spec.network`` only.
- A rule's ``destination`` is an exact domain (``api.example.com``), a wildcard
  ``*.example.com`` (any name strictly below ``example.com``, not the apex itself), ``*``
  (any name), or an IP / CIDR (``203.0.113.7``, ``10.0.0.0/8``, ``fd00::/8``). Domain rules
  match the requested name; CIDR rules match every IP a name allowed by a domain rule
  resolved to, and IP-literal requests. A CIDR rule never admits a name by itself: a name
  no domain rule allows is refused without being resolved (no DNS exfiltration), so reach a
  service by its IP, or add a domain rule for its name. ``port`` (optional) restricts the
  rule to one TCP port.
- An allow rule may instead name an in-cluster **Service** (``{service, namespace, port}``,
  optionally ``pods`` labels and ``target_port``; Kubernetes only, see :mod:`.cluster`): it
  admits that Service's names on that port, and grants the private addresses they resolve to.
- **Deny rules win** over allow rules regardless of order; an allow rule entirely covered by
  a deny rule is rejected as contradictory.
- **Special addresses** (private, CGNAT, loopback, link-local and the 169.254.169.254
  metadata address, multicast, unspecified, reserved; IPv6 ULA, link-local, ...) are never
  granted by a domain rule, a wildcard or the default: only a CIDR rule lying *inside* the
  special range grants them (``10.0.0.0/8``, ``169.254.169.254/32``). ``0.0.0.0/0`` and
  ``::/0`` mean "every public address" (requested by IP; add ``*`` for names); any other
  CIDR that straddles a special range (``8.0.0.0/6`` covers ``10.0.0.0/8``) is rejected:
  split it or name the range.
- With any credential, allow-all egress is rejected: ``default: allow``, ``*`` or a ``/0``
  allow rule would let a compromised agent send the credential (or the sidecar's access)
  anywhere.

Credentials:

- ``env_var``: set only in the sandbox's environment (validated name, never a proxy or
  loader variable such as ``HTTPS_PROXY``, ``PATH``, ``LD_PRELOAD`` or ``AIRLOCK_*``).
- ``file``: written to a tmpfs mount at the absolute ``path`` (mode 0400, owned by the
  sandbox user, removed at teardown); system locations are refused.
- ``sidecar``: the secret never enters the sandbox. A credential proxy outside the sandbox
  forwards to the credential's *route* — the upstream base URL plus the header it injects —
  and strips any credential header the sandbox sent. The route is looked up by credential
  name, first in the ``sidecar_routes`` the airlock configuration supplies, then in
  :data:`SIDECAR_CONVENTIONS` (``anthropic-api-key`` → ``https://api.anthropic.com`` with
  ``x-api-key``; ``openai-api-key`` → ``https://api.openai.com`` with ``Authorization:
  Bearer``). The route's host and port must be allowed by an allow rule (a domain rule for a
  name, a CIDR rule for an IP literal), so the plan lists every place the secret can go.
"""

from __future__ import annotations

import contextlib
import ipaddress
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from airlock.errors import ConfigError
from layer0 import EnvironmentSpec, NetworkPolicyIsolation, NetworkRule

from .cluster import DEFAULT_CLUSTER_DOMAIN, SERVICE_PREFIX, ClusterService, grants_cluster_range
from .decision import (
    SPECIAL_RANGES,
    IPAddress,
    IPNetwork,
    decide,
    net_overlap,
    net_within,
    normalise_host,
    parse_ip,
)

__all__ = [
    "SIDECAR_CONVENTIONS",
    "SIDECAR_STRIPPED_HEADERS",
    "CredentialPlacement",
    "EgressPlan",
    "EgressRule",
    "PolicyError",
    "SandboxPlan",
    "SidecarRoute",
    "compile_plan",
]

Action = Literal["allow", "deny"]
DestinationKind = Literal["domain", "suffix", "any_domain", "cidr", "service"]
InjectionKind = Literal["env_var", "file", "sidecar"]

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CREDENTIAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_RESERVED_ENV = frozenset(
    {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "PATH", "HOME", "USER", "SHELL", "PYTHONPATH",
     "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "SSL_CERT_FILE",
     "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"}
)  # fmt: skip
_SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot",
                "/run/airlock", "/opt/venv")  # fmt: skip

#: Headers the credential proxy always removes from sandbox requests (plus the route's own header).
SIDECAR_STRIPPED_HEADERS: tuple[str, ...] = ("authorization", "x-api-key", "api-key", "proxy-authorization")


class PolicyError(ConfigError):
    """Raised when a spec's network or credential part is invalid, unsafe or contradictory.

    ``problems`` lists every problem found (the message joins them, one per line).
    """

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid network/credential policy:\n{lines}")


class _Plan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EgressRule(_Plan):
    """One normalised rule: what it matches, on which port, allow or deny, and where it came from."""

    #: Normalised destination: ``api.example.com``, ``*.example.com``, ``*``, a CIDR
    #: (``10.0.0.0/8``) or an in-cluster Service (``k8s-service:NS/NAME?...``, see :mod:`.cluster`).
    destination: str
    kind: DestinationKind
    #: TCP port, or None for every port.
    port: int | None = Field(default=None, ge=1, le=65535)
    action: Action
    #: Where the rule was written (``spec.network.rules[0]``, ``isolation[1].rules[2]``).
    source: str = ""

    _network: IPNetwork | None = PrivateAttr(default=None)
    _service: ClusterService | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        kind, problem = _classify(self.destination)
        if problem is not None:
            raise ValueError(problem)
        if kind != self.kind:
            raise ValueError(f"destination {self.destination!r} is a {kind}, not a {self.kind}")
        if kind == "cidr":
            self._network = ipaddress.ip_network(self.destination)
        if kind == "service":
            self._service = ClusterService.parse(self.destination)
        return self

    @property
    def network(self) -> IPNetwork | None:
        """The CIDR as a network (None for domain rules)."""
        return self._network

    @property
    def service(self) -> ClusterService | None:
        """The in-cluster Service (None unless ``kind`` is ``service``)."""
        return self._service

    def matches(
        self,
        name: str | None,
        port: int,
        ip: IPAddress | None,
        *,
        cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
    ) -> bool:
        """Whether the rule covers ``name`` (None for an IP literal request) / ``ip`` on ``port``.

        A Service rule matches its full name in ``cluster_domain`` only (the decision maps
        the short forms to it first).
        """
        if self.port is not None and self.port != port:
            return False
        if self._service is not None:
            return name is not None and name == self._service.fqdn(cluster_domain)
        if self.kind == "cidr":
            net = self._network
            return ip is not None and net is not None and ip.version == net.version and ip in net
        if name is None:
            return False
        if self.kind == "any_domain":
            return True
        if self.kind == "domain":
            return name == self.destination
        return name.endswith(self.destination[1:])  # "*.example.com" -> ".example.com"

    def names_special(self, special: IPNetwork) -> bool:
        """Whether this is a CIDR rule inside ``special``, or a Service rule and ``special`` is
        a range cluster addresses live in (so it may grant addresses in it)."""
        if self._service is not None:
            return grants_cluster_range(special)
        net = self._network
        return net is not None and net_within(net, special)

    def specificity(self) -> tuple[int, int, bool]:
        """Ordering key: more specific rules win among several matching allow rules."""
        rank = {"service": 4, "cidr": 3, "domain": 2, "suffix": 1, "any_domain": 0}[self.kind]
        detail = self._network.prefixlen if self._network is not None else len(self.destination)
        return rank, detail, self.port is not None

    def shown_destination(self) -> str:
        """The destination as people write it (a Service by name, an IPv6 CIDR in brackets)."""
        if self._service is not None:
            return self._service.display()
        return (
            f"[{self.destination}]" if self.kind == "cidr" and ":" in self.destination else self.destination
        )

    def label(self) -> str:
        """Short human name, e.g. ``allow *.example.com:443 (spec.network.rules[2])``."""
        dest = self.shown_destination()
        port = f":{self.port}" if self.port is not None else ""
        src = f" ({self.source})" if self.source else ""
        return f"{self.action} {dest}{port}{src}"


class EgressPlan(_Plan):
    """What the sandbox may reach. Serialised to the egress proxy's ``--plan-file``."""

    default: Action = "deny"
    rules: tuple[EgressRule, ...] = ()
    #: The cluster's DNS domain, for Service rules (set by the Kubernetes backend).
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    #: The sandbox's namespace: a Service there may also be named by its bare name.
    cluster_namespace: str | None = None

    @model_serializer(mode="wrap")
    def _without_default_cluster(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """The cluster fields only when set (a plan without them reads the same everywhere)."""
        data: dict[str, object] = handler(self)
        if data.get("cluster_domain") == DEFAULT_CLUSTER_DOMAIN:
            data.pop("cluster_domain")
        if data.get("cluster_namespace") is None:
            data.pop("cluster_namespace", None)
        return data

    def service_name(self, host: str) -> str | None:
        """The full in-cluster name of the allowed Service ``host`` names, or None.

        ``host`` may be any form :meth:`ClusterService.names` lists (normalised first).
        """
        forms = self.service_forms(host)
        return forms[0] if forms else None

    def service_forms(self, host: str) -> tuple[str, ...]:
        """Every name of the allowed Service ``host`` names, the full one first (empty: none)."""
        host = normalise_host(host)
        for rule in self.rules:
            svc = rule.service
            names = svc.names(self.cluster_domain, self.cluster_namespace) if svc is not None else ()
            if svc is not None and host in names:
                full = svc.fqdn(self.cluster_domain)
                return (full, *sorted(n for n in names if n != full))
        return ()

    @property
    def allows_anything(self) -> bool:
        """False when nothing at all may leave (the backend then needs no egress proxy)."""
        return self.default == "allow" or any(r.action == "allow" for r in self.rules)

    @property
    def resolves_names(self) -> bool:
        """Whether the egress proxy ever needs DNS: only a name rule or an allow default can
        admit a name (a CIDR rule admits IP literals only)."""
        return self.default == "allow" or any(r.action == "allow" and r.kind != "cidr" for r in self.rules)

    def allows_name(self, host: str, port: int) -> bool:
        """Whether a *name* rule (or, for an IP literal, a CIDR rule) allows ``host:port``.

        Used at configuration time, when nothing is resolved: a name allowed only through a
        CIDR rule or the default does not count.
        """
        host = normalise_host(host)
        if parse_ip(host) is not None:  # an IP literal is decided fully
            return decide(self, host, port, []).allowed
        forms = self.service_forms(host) or (host,)
        domain = self.cluster_domain

        def by_name(action: Action, name: str) -> bool:
            return any(
                r.action == action and r.kind != "cidr" and r.matches(name, port, None, cluster_domain=domain)
                for r in self.rules
            )

        return not any(by_name("deny", f) for f in forms) and by_name("allow", forms[0])


class SidecarRoute(_Plan):
    """Where a sidecar credential goes and how it is injected."""

    #: Upstream base URL the credential proxy forwards to (``https://api.anthropic.com``).
    upstream: str
    #: Header carrying the secret (``x-api-key``, ``authorization``).
    header: str
    #: Text placed before the secret in the header value (``"Bearer "`` for Authorization).
    value_prefix: str = ""

    @field_validator("upstream")
    @classmethod
    def _valid_upstream(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream {value!r} must be an http(s) URL with a host")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"upstream {value!r} must not carry credentials, a query or a fragment")
        try:
            parts.port  # noqa: B018 - validates the port
        except ValueError as e:
            raise ValueError(f"upstream {value!r} has an invalid port") from e
        return value.rstrip("/")

    @field_validator("header")
    @classmethod
    def _valid_header(cls, value: str) -> str:
        if not _HEADER_NAME.match(value):
            raise ValueError(f"invalid header name {value!r}")
        return value.lower()

    @property
    def scheme(self) -> str:
        """``http`` or ``https``."""
        return urlsplit(self.upstream).scheme

    @property
    def host(self) -> str:
        """The upstream host (no brackets)."""
        return urlsplit(self.upstream).hostname or ""

    @property
    def port(self) -> int:
        """The upstream port (the scheme's default when the URL names none)."""
        parts = urlsplit(self.upstream)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def stripped_headers(self) -> tuple[str, ...]:
        """Headers removed from every sandbox request before the secret is added."""
        return tuple(dict.fromkeys((*SIDECAR_STRIPPED_HEADERS, self.header)))


#: Built-in sidecar routes by credential name (the configuration's ``sidecar_routes`` override them).
SIDECAR_CONVENTIONS: Mapping[str, SidecarRoute] = {
    "anthropic-api-key": SidecarRoute(upstream="https://api.anthropic.com", header="x-api-key"),
    "openai-api-key": SidecarRoute(
        upstream="https://api.openai.com", header="authorization", value_prefix="Bearer "
    ),
}


class CredentialPlacement(_Plan):
    """Where one credential goes. Names only; the value is resolved at provisioning time."""

    name: str
    kind: InjectionKind
    #: env_var: the variable set in the sandbox.
    var_name: str | None = None
    #: file: the absolute path of the 0400 file on the sandbox's tmpfs.
    path: str | None = None
    #: sidecar: the upstream and header the credential proxy injects it into.
    route: SidecarRoute | None = None
    source: str = ""

    @property
    def enters_sandbox(self) -> bool:
        """Whether the secret value is visible inside the sandbox (env_var, file)."""
        return self.kind != "sidecar"

    def target(self) -> str:
        """Human description of where the secret goes."""
        if self.kind == "env_var":
            return f"env ${self.var_name} inside the sandbox"
        if self.kind == "file":
            return f"file {self.path} (tmpfs, mode 0400) inside the sandbox"
        assert self.route is not None
        prefix = self.route.value_prefix.strip()
        header = f"header {self.route.header}" + (f": {prefix} ..." if prefix else "")
        return f"{self.route.upstream} via credential proxy ({header}; never in the sandbox)"


class SandboxPlan(_Plan):
    """The compiled, backend-neutral network and credential plan of one sandbox."""

    egress: EgressPlan = Field(default_factory=EgressPlan)
    credentials: tuple[CredentialPlacement, ...] = ()

    @property
    def needs_egress_proxy(self) -> bool:
        """Whether any egress is allowed (otherwise the sandbox simply has no network route)."""
        return self.egress.allows_anything

    @property
    def sidecars(self) -> tuple[CredentialPlacement, ...]:
        """The credentials served by a credential proxy."""
        return tuple(c for c in self.credentials if c.kind == "sidecar")

    def egress_rows(self) -> list[dict[str, str]]:
        """Table rows (``#, action, destination, port, matches, source``) plus a final default row."""
        rows = [
            {
                "#": str(i + 1),
                "action": r.action,
                "destination": r.shown_destination(),
                "port": str(r.port) if r.port is not None else "any",
                "matches": _describe_kind(r),
                "source": r.source,
            }
            for i, r in enumerate(self.egress.rules)
        ]
        rows.append(
            {
                "#": "-",
                "action": self.egress.default,
                "destination": "(default)",
                "port": "any",
                "matches": "everything else (public addresses only)"
                if self.egress.default == "allow"
                else "everything else",
                "source": "spec.network.default" if self.egress.default == "allow" else "default",
            }
        )
        return rows

    def credential_rows(self) -> list[dict[str, str]]:
        """Table rows (``name, injection, target, in sandbox``)."""
        return [
            {
                "name": c.name,
                "injection": c.kind,
                "target": c.target(),
                "in sandbox": "yes" if c.enters_sandbox else "no",
            }
            for c in self.credentials
        ]

    def render_text(self) -> str:
        """The plan as plain-text tables (what ``airlock agents show`` prints)."""
        out = [
            f"egress: default {self.egress.default}; private, loopback, link-local and metadata "
            "addresses only via an explicit CIDR rule",
            _table(self.egress_rows()),
            "",
        ]
        if self.credentials:
            out += ["credentials:", _table(self.credential_rows())]
        else:
            out.append("credentials: none")
        return "\n".join(out)


def compile_plan(
    spec: EnvironmentSpec, *, sidecar_routes: Mapping[str, SidecarRoute] | None = None
) -> SandboxPlan:
    """Compile ``spec``'s network and credential parts into a validated :class:`SandboxPlan`.

    Args:
        spec: The environment spec.
        sidecar_routes: Airlock-side routes for sidecar credentials, by credential name;
            they take precedence over :data:`SIDECAR_CONVENTIONS`.

    Raises:
        PolicyError: listing every invalid, unsafe or contradictory rule or credential.
    """
    problems: list[str] = []
    sources: list[tuple[str, NetworkRule]] = []
    default: Action = "deny"
    if spec.network is not None:
        default = "allow" if spec.network.default.value == "allow" else "deny"
        sources += [(f"spec.network.rules[{i}]", r) for i, r in enumerate(spec.network.rules)]
    for b, boundary in enumerate(spec.isolation):
        if isinstance(boundary, NetworkPolicyIsolation):
            sources += [(f"isolation[{b}].rules[{i}]", r) for i, r in enumerate(boundary.rules)]

    rules: list[EgressRule] = []
    for source, raw in sources:
        rule = _compile_rule(source, raw, problems)
        if rule is not None:
            rules.append(rule)
    _check_contradictions(rules, problems)
    egress = EgressPlan(default=default, rules=tuple(rules))

    routes = {**SIDECAR_CONVENTIONS, **(sidecar_routes or {})}
    credentials = _compile_credentials(spec, routes, egress, problems)
    if spec.credentials:
        _check_allow_all(egress, problems)
    if problems:
        raise PolicyError(problems)
    return SandboxPlan(egress=egress, credentials=tuple(credentials))


# --- rules -------------------------------------------------------------------------------


def _classify(destination: str) -> tuple[DestinationKind, str | None]:
    """The kind of a *normalised* destination, and a problem text if it is invalid."""
    if destination.startswith(SERVICE_PREFIX):
        try:
            ClusterService.parse(destination)
        except ValueError as e:
            return "service", f"invalid Service destination: {_first_error(e)}"
        return "service", None
    if destination == "*":
        return "any_domain", None
    if destination.startswith("*."):
        problem = _domain_problem(destination[2:])
        return "suffix", (f"wildcard {destination!r}: {problem}" if problem else None)
    if "/" in destination or ":" in destination or _looks_numeric(destination):
        try:
            ipaddress.ip_network(destination, strict=True)
        except ValueError as e:
            if destination.count(":") == 1 and "/" not in destination:
                return "cidr", f"{destination!r} includes a port; put the port in the rule's port field"
            try:
                loose = ipaddress.ip_network(destination, strict=False)
            except ValueError:
                return "cidr", f"invalid IP/CIDR {destination!r}: {e}"
            return "cidr", f"invalid CIDR {destination!r}: host bits set; did you mean {loose}?"
        return "cidr", None
    problem = _domain_problem(destination)
    return "domain", (f"invalid domain {destination!r}: {problem}" if problem else None)


def _looks_numeric(text: str) -> bool:
    return bool(text) and all(part.isdigit() for part in text.split("."))


def _domain_problem(name: str) -> str | None:
    if not name:
        return "empty name"
    if not name.isascii():
        return "non-ASCII; write internationalised names in their xn-- (punycode) form"
    if "*" in name:
        return "'*' is only allowed as the whole first label ('*.example.com') or alone"
    if len(name) > 253:
        return "longer than 253 characters"
    labels = name.split(".")
    for label in labels:
        if not _LABEL.match(label):
            return f"label {label!r} is not letters, digits and inner hyphens (1-63 characters)"
    if labels[-1].isdigit():
        return "the last label is numeric (an IP address must be written in full)"
    return None


def _first_error(error: ValueError) -> str:
    """A pydantic error's first message, or the error's text."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        return str(errors()[0]["msg"]).removeprefix("Value error, ")
    return str(error)


def _normalise_destination(text: str) -> str:
    if text.strip().startswith(SERVICE_PREFIX):  # label values keep their case
        with contextlib.suppress(ValueError):  # else reported by _classify
            return ClusterService.parse(text.strip()).destination()
        return text.strip()
    dest = text.strip().lower()
    if dest.startswith("[") and "]" in dest:  # "[fd00::1]" or "[fd00::]/8"
        dest = dest[1:].replace("]", "", 1)
    if dest.endswith(".") and dest not in (".", "*."):
        dest = dest[:-1]
    if "/" not in dest and dest not in ("*",) and not dest.startswith("*."):
        with contextlib.suppress(ValueError):  # a bare IP becomes a host CIDR
            dest = str(ipaddress.ip_network(dest))
    elif "/" in dest:
        with contextlib.suppress(ValueError):  # else reported by _classify with the original text
            dest = str(ipaddress.ip_network(dest, strict=True))
    return dest


def _compile_rule(source: str, raw: NetworkRule, problems: list[str]) -> EgressRule | None:
    dest = _normalise_destination(raw.destination)
    kind, problem = _classify(dest)
    if problem is not None:
        problems.append(f"{source}: {problem}")
        return None
    if raw.port is not None and not 1 <= raw.port <= 65535:
        problems.append(f"{source}: port {raw.port} is out of range (1-65535)")
        return None
    action: Action = "allow" if raw.action.value == "allow" else "deny"
    if kind == "service" and (action != "allow" or raw.port is None):
        problems.append(
            f"{source}: a Service destination is allowed on one port: it needs a port, "
            "and cannot be a deny rule (deny a domain or CIDR instead)"
        )
        return None
    rule = EgressRule(destination=dest, kind=kind, port=raw.port, action=action, source=source)
    if action == "allow" and rule.network is not None and rule.network.prefixlen > 0:
        net = rule.network
        for label, special in SPECIAL_RANGES:
            if net_overlap(net, special) and not net_within(net, special):
                problems.append(
                    f"{source}: allow {net} spans the {label} range {special} without being inside it; "
                    f"a wildcard never grants special addresses — split the rule, or allow {special} "
                    "(or a part of it) explicitly"
                )
                return None
    return rule


def _covers(deny: EgressRule, allow: EgressRule) -> bool:
    """Whether every connection ``allow`` matches is also matched by ``deny``."""
    if deny.port is not None and deny.port != allow.port:
        return False
    if allow.kind == "service":
        return deny.kind == "any_domain"
    if deny.kind == "cidr" or allow.kind == "cidr":
        d, a = deny.network, allow.network
        return d is not None and a is not None and net_within(a, d)
    if deny.kind == "any_domain":
        return True
    if allow.kind == "any_domain":
        return False
    if deny.kind == "domain":
        return allow.kind == "domain" and allow.destination == deny.destination
    suffix = deny.destination[1:]  # ".example.com"
    target = allow.destination[1:] if allow.kind == "suffix" else allow.destination
    return (
        target.endswith(suffix) if allow.kind == "domain" else (target == suffix or target.endswith(suffix))
    )


def _check_contradictions(rules: list[EgressRule], problems: list[str]) -> None:
    for allow in (r for r in rules if r.action == "allow"):
        for deny in (r for r in rules if r.action == "deny"):
            if _covers(deny, allow):
                same = deny.destination == allow.destination and deny.port == allow.port
                what = "contradicts" if same else "is entirely overridden by"
                problems.append(f"{allow.label()} {what} {deny.label()} (deny rules win)")
                break


def _check_allow_all(egress: EgressPlan, problems: list[str]) -> None:
    why = (
        "with credentials configured, egress must be an explicit allow-list "
        "(a compromised agent could send a credential anywhere)"
    )
    if egress.default == "allow":
        problems.append(f"spec.network.default is allow: {why}")
    for r in egress.rules:
        if r.action == "allow" and (
            r.kind == "any_domain" or (r.network is not None and r.network.prefixlen == 0)
        ):
            problems.append(f"{r.label()} allows every destination: {why}")


# --- credentials -----------------------------------------------------------------------------


def _compile_credentials(
    spec: EnvironmentSpec, routes: Mapping[str, SidecarRoute], egress: EgressPlan, problems: list[str]
) -> list[CredentialPlacement]:
    out: list[CredentialPlacement] = []
    names: dict[str, str] = {}
    targets: dict[str, str] = {}
    for i, cred in enumerate(spec.credentials):
        source = f"spec.credentials[{i}]"
        where = f"{source} ({cred.name!r})"
        if not _CREDENTIAL_NAME.match(cred.name):
            problems.append(
                f"{source}: credential name {cred.name!r} must be 1-128 letters, digits, '.', '_' or '-' "
                "(and start with a letter or digit)"
            )
            continue
        if cred.name in names:
            problems.append(f"{where}: the credential is already injected by {names[cred.name]}")
            continue
        names[cred.name] = source
        kind = cred.injection.kind
        if kind == "env_var":
            var = cred.injection.var_name or ""
            if not _ENV_NAME.match(var):
                problems.append(f"{where}: env var name {var!r} is not a valid identifier")
                continue
            if var.upper() in _RESERVED_ENV or var.upper().startswith("AIRLOCK_"):
                problems.append(f"{where}: env var {var} is reserved (proxy, loader or airlock variable)")
                continue
            if _claim(targets, f"env:{var}", where, problems):
                out.append(CredentialPlacement(name=cred.name, kind="env_var", var_name=var, source=source))
        elif kind == "file":
            raw = cred.injection.path or ""
            path = posixpath.normpath(raw) if raw else ""
            if not raw.startswith("/") or path == "/" or ".." in raw.split("/"):
                problems.append(f"{where}: file path {raw!r} must be absolute, without '..', and not '/'")
                continue
            if any(path == d or path.startswith(d + "/") for d in _SYSTEM_DIRS):
                problems.append(f"{where}: file path {path} is inside a system directory")
                continue
            if _claim(targets, f"file:{path}", where, problems):
                out.append(CredentialPlacement(name=cred.name, kind="file", path=path, source=source))
        else:
            route = routes.get(cred.name)
            if route is None:
                known = ", ".join(sorted(routes)) or "none"
                problems.append(
                    f"{where}: sidecar injection needs a route (upstream URL and header) for this "
                    f"credential name; known routes: {known}; add one to the configuration's sidecar_routes"
                )
                continue
            if not egress.allows_name(route.host, route.port):
                dest = route.host if ":" not in route.host else f"[{route.host}]"
                problems.append(
                    f"{where}: the sidecar forwards to {dest}:{route.port}, which no allow rule permits; "
                    f"add an allow rule for {route.host} (port {route.port})"
                )
                continue
            out.append(CredentialPlacement(name=cred.name, kind="sidecar", route=route, source=source))
    return out


def _claim(targets: dict[str, str], key: str, where: str, problems: list[str]) -> bool:
    if key in targets:
        problems.append(f"{where}: {key.split(':', 1)[1]} is already used by {targets[key]}")
        return False
    targets[key] = where
    return True


def _describe_kind(rule: EgressRule) -> str:
    if rule.service is not None:
        return "this Service's names (its private addresses included) inside the cluster"
    if rule.kind == "any_domain":
        return "any name"
    if rule.kind == "suffix":
        return f"names below {rule.destination[2:]}"
    if rule.kind == "domain":
        return "exactly this name"
    net = rule.network
    assert net is not None
    if net.prefixlen == 0:
        return f"every public IPv{net.version} address"
    return "addresses in this range"


def _table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "  (none)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    lines = ["  " + "  ".join(c.ljust(widths[c]) for c in cols).rstrip()]
    lines += ["  " + "  ".join(r[c].ljust(widths[c]) for c in cols).rstrip() for r in rows]
    return "\n".join(lines)

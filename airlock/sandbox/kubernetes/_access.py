"""What the Kubernetes backend may ask of the API server: one table, checked on every request.

An :class:`Access` is one RBAC permission: a verb on a resource of an API group (``pods/log``
names a subresource; a path such as ``/version`` a non-resource URL), in the sandbox namespace
or cluster-wide, optionally on named objects only (``resourceNames``, taken from the settings),
optionally only in one connection mode. The tables:

* :data:`SANDBOX_ACCESS`: the backend's job flow (provision, start, the warm pool's deadline,
  the proxy's log, port-forward, teardown, the owner Lease, the reaper).
* :data:`DOCTOR_ACCESS`: what ``airlock doctor`` adds (it also uses :data:`SANDBOX_ACCESS`).
* :data:`RELEASE_TEST_ACCESS`: ``airlock doctor --probe``, which recreates a Helm release's
  test hooks with the operator's kubeconfig, in any namespace.
* :data:`ADDRESSES_ACCESS`: the isolation probe pod, finding the sandboxes' pods.

:class:`~._api.KubeApi` derives every request's permissions from its method and path, as the
API server's authorizer does (:func:`request_permissions`), and refuses a request the table it
was given does not grant, before it is sent. ``airlock doctor`` asks one SelfSubjectAccessReview
per granted permission; the Helm chart renders its Role and ClusterRole from
:func:`chart_access` (``helm/airlock/files/controller-access.json``, compared by a test).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._settings import KubernetesSettings

__all__ = [
    "ADDRESSES_ACCESS",
    "ANY_NAMESPACE",
    "CONNECT_MODES",
    "DNS_DISCOVERY_ACCESS",
    "DOCTOR_ACCESS",
    "RELEASE_TEST_ACCESS",
    "SANDBOX_ACCESS",
    "STORAGE_DISCOVERY_ACCESS",
    "Access",
    "AccessRefused",
    "AccessTable",
    "ConnectMode",
    "Grant",
    "Grants",
    "Permission",
    "chart_access",
    "request_permissions",
    "resolve",
    "rules",
]

#: Where a refusal is logged (an error: a request the code makes that its table lacks).
_log = logging.getLogger("airlock.sandbox.kubernetes.access")

ConnectMode = Literal["pod_ip", "port_forward"]
CONNECT_MODES: tuple[ConnectMode, ...] = ("pod_ip", "port_forward")
#: Which configured names an entry is limited to (its ``resourceNames``).
NamesFrom = Literal["sandbox_namespace", "runtime_classes", "image_pull_secrets"]
Where = Literal["sandbox", "pull_secrets_from"]
#: A grant's namespace meaning every namespace (the operator's own identity).
ANY_NAMESPACE = "*"


@dataclass(frozen=True)
class Access:
    """One permission of a table (see the module docstring)."""

    verb: str
    #: The API group ("" for core); unused for a non-resource URL.
    group: str
    #: ``pods``, ``pods/log`` (a subresource), or a non-resource URL (``/version``).
    resource: str
    #: Cluster-scoped (runtimeclasses, namespaces, reviews); else in the sandbox namespace.
    cluster: bool = False
    #: Only the objects these settings name (``resourceNames``); None: any object.
    names: NamesFrom | None = None
    #: The connection modes that need it.
    modes: frozenset[ConnectMode] = frozenset(CONNECT_MODES)
    #: Where a namespaced entry applies: the sandbox namespace, or the one image pull Secrets
    #: are copied from (``pull_secrets_from``; the entry is left out when that is unset).
    where: Where = "sandbox"
    #: A namespaced entry in this namespace, whatever the settings say (``kube-system``).
    namespace: str | None = None
    #: Only these objects, whatever the settings say (with :attr:`names` unset).
    fixed_names: tuple[str, ...] = ()
    #: The default ClusterRole that already grants it to every authenticated identity (the
    #: chart does not grant it, doctor does not review it).
    default_role: str | None = None


@dataclass(frozen=True)
class AccessTable:
    """A named table of :class:`Access` entries (``a + b``: both, named so)."""

    name: str
    entries: tuple[Access, ...]

    def __iter__(self) -> Iterator[Access]:
        return iter(self.entries)

    def __add__(self, other: AccessTable) -> AccessTable:
        return AccessTable(f"{self.name} + {other.name}", self.entries + other.entries)


def _each(verbs: str, group: str, resource: str, **kw: Any) -> tuple[Access, ...]:
    return tuple(Access(verb, group, resource, **kw) for verb in verbs.split())


_NETPOL = "networking.k8s.io"
_PORT_FORWARD: frozenset[ConnectMode] = frozenset({"port_forward"})

#: Every request of the backend's job flow.
SANDBOX_ACCESS = AccessTable(
    "SANDBOX_ACCESS",
    (
        # sandbox and proxy pods: created, read until running, deleted; the reaper lists them
        *_each("create get list delete patch", "", "pods"),  # patch: a warm pod's deadline
        Access("get", "", "pods/log"),  # the proxy pod's events, followed
        # The port-forward's WebSocket upgrade is a GET; newer API servers also check create.
        *_each("get create", "", "pods/portforward", modes=_PORT_FORWARD),
        *_each("create list delete", "", "secrets"),  # a sandbox's token and proxy Secrets
        Access("list", "", "events"),  # why a pod cannot start
        *_each("create list delete", _NETPOL, "networkpolicies"),  # per sandbox, and default-deny
        *_each("create update list delete", "coordination.k8s.io", "leases"),  # the owner Lease
        # a RuntimeClass exists before a pod names it; the namespace answers (airlock gc, doctor)
        Access("get", "node.k8s.io", "runtimeclasses", cluster=True, names="runtime_classes"),
        Access("get", "", "namespaces", cluster=True, names="sandbox_namespace"),
        # the enforcement proof's verdict, annotated on the namespace (doctor reads it)
        Access("patch", "", "namespaces", cluster=True, names="sandbox_namespace"),
        # image pull Secrets copied from pull_secrets_from into the sandbox namespace, by name
        Access("get", "", "secrets", names="image_pull_secrets", where="pull_secrets_from"),
        *_each("get update", "", "secrets", names="image_pull_secrets"),
    ),
)

#: What ``airlock doctor`` asks besides :data:`SANDBOX_ACCESS`.
DOCTOR_ACCESS = AccessTable(
    "DOCTOR_ACCESS",
    (
        Access("get", "", "/version", cluster=True, default_role="system:public-info-viewer"),
        Access(
            "create",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            cluster=True,
            default_role="system:basic-user",
        ),
        Access("get", "", "secrets", names="image_pull_secrets"),  # the pull Secrets exist
    ),
)

#: ``airlock doctor --probe``: the release's storage Secrets, its test hooks recreated, the
#: test pod's outcome and log (the operator's kubeconfig; hooks may live in any namespace).
RELEASE_TEST_ACCESS = AccessTable(
    "RELEASE_TEST_ACCESS",
    (
        Access("list", "", "secrets"),
        Access("get", "", "pods"),
        Access("get", "", "pods/log"),
        *(
            access
            for group, resource in (
                ("", "pods"),
                ("", "services"),
                ("", "serviceaccounts"),
                ("", "configmaps"),
                ("", "secrets"),
                ("rbac.authorization.k8s.io", "roles"),
                ("rbac.authorization.k8s.io", "rolebindings"),
            )
            for access in _each("create delete", group, resource)
        ),
        # the hook binding its ServiceAccount to the controller's ClusterRole
        *_each("create delete", "rbac.authorization.k8s.io", "clusterrolebindings", cluster=True),
    ),
)

#: How ``airlock doctor`` finds the cluster's resolver (the kube-dns Service, NodeLocal
#: DNSCache's DaemonSet, OpenShift's DNS namespace). Neither granted by the chart nor reviewed:
#: doctor reports what it could not read as a warning.
DNS_DISCOVERY_ACCESS = AccessTable(
    "DNS_DISCOVERY_ACCESS",
    (
        Access("get", "", "services", namespace="kube-system", fixed_names=("kube-dns",)),
        Access("get", "apps", "daemonsets", namespace="kube-system", fixed_names=("node-local-dns",)),
        Access("get", "", "namespaces", cluster=True, fixed_names=("openshift-dns",)),
    ),
)

#: ``airlock doctor`` (optional, with the operator's identity): whether the cluster has a
#: default StorageClass for the controller's job-store claim (not in the chart's Role).
STORAGE_DISCOVERY_ACCESS = AccessTable(
    "STORAGE_DISCOVERY_ACCESS",
    (Access("list", "storage.k8s.io", "storageclasses", cluster=True),),
)

#: The isolation probe pod: the running sandboxes' pods and their IPs.
ADDRESSES_ACCESS = AccessTable("ADDRESSES_ACCESS", (Access("list", "", "pods"),))


@dataclass(frozen=True)
class Permission:
    """What one request needs: a verb on a resource, in a namespace (None: cluster-scoped),
    on an object (None: a collection)."""

    verb: str
    group: str
    resource: str
    namespace: str | None = None
    name: str | None = None

    def __str__(self) -> str:
        what = self.resource + (f".{self.group}" if self.group else "")
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {what}{f' {self.name!r}' if self.name else ''}{where}"


@dataclass(frozen=True)
class Grant:
    """An :class:`Access` resolved for settings: its namespace and resource names."""

    verb: str
    group: str
    resource: str
    #: None: cluster-scoped; :data:`ANY_NAMESPACE`: every namespace.
    namespace: str | None
    #: Only these objects (empty: any).
    names: tuple[str, ...] = ()
    default_role: str | None = None

    def allows(self, need: Permission) -> bool:
        """Whether this grant covers ``need``."""
        if (need.verb, need.group, need.resource) != (self.verb, self.group, self.resource):
            return False
        if self.namespace is None or need.namespace is None:
            if self.namespace != need.namespace:
                return False
        elif self.namespace not in (ANY_NAMESPACE, need.namespace):
            return False
        return not self.names or need.name in self.names


class AccessRefused(Exception):
    """Raised when a request is outside the access table its client was given (a bug in
    airlock: every call must be listed): refused before it is sent."""


@dataclass(frozen=True)
class Grants:
    """A resolved table: what one client may ask; :meth:`check_request` refuses anything else."""

    grants: tuple[Grant, ...]
    #: The table's name, for the refusal message.
    table: str = "the access table"

    def check_request(
        self,
        method: str,
        path: str,
        path_params: Mapping[str, Any] | None = None,
        query: Sequence[tuple[str, Any]] | None = None,
    ) -> None:
        """Pass when every permission the request needs (:func:`request_permissions`) is
        granted; a refusal is also logged as an error (some callers swallow exceptions).

        Raises:
            AccessRefused: naming the permission missing from the table, or a path this
                cannot read.
        """
        try:
            for need in request_permissions(method, path, path_params, query):
                if not any(g.allows(need) for g in self.grants):
                    raise AccessRefused(
                        f"{method} {path} needs {need}, which is not in {self.table}: refused before it "
                        "was sent (add it to the table in airlock/sandbox/kubernetes/_access.py)"
                    )
        except AccessRefused as e:
            _log.error("%s", e)
            raise


def _names(source: NamesFrom, settings: KubernetesSettings) -> tuple[str, ...]:
    if source == "sandbox_namespace":
        return (settings.namespace,)
    if source == "runtime_classes":
        classes = settings.runtime_classes
        return tuple(dict.fromkeys((classes.gvisor, classes.micro_vm, *settings.placement_runtime_classes)))
    return tuple(settings.image_pull_secrets)


def resolve(
    table: AccessTable,
    settings: KubernetesSettings,
    mode: ConnectMode,
    *,
    namespace: str | None = None,
) -> Grants:
    """``table`` for ``settings`` in connection ``mode``: namespaced entries in ``namespace``
    (default: the sandbox namespace), resource names filled in. An entry whose names resolve
    to none is left out: an empty ``resourceNames`` would grant every object."""
    grants = []
    for access in table:
        if mode not in access.modes:
            continue
        names = access.fixed_names if access.names is None else _names(access.names, settings)
        if access.names is not None and not names:
            continue
        if access.cluster:
            where = None
        elif access.namespace is not None:
            where = access.namespace
        elif access.where == "pull_secrets_from":
            where = settings.pull_secrets_from
            if where is None:
                continue
        else:
            where = namespace or settings.namespace
        grants.append(Grant(access.verb, access.group, access.resource, where, names, access.default_role))
    return Grants(tuple(dict.fromkeys(grants)), table.name)


#: A GET on these is a WebSocket (or SPDY) upgrade: newer API servers also check ``create``.
_UPGRADES = frozenset({"portforward", "exec", "attach"})
#: The namespace object's own subresources (``/namespaces/{name}/status``), as the API server reads them.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_COLLECTION_VERBS = {"GET": "list", "POST": "create", "DELETE": "deletecollection"}
_OBJECT_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}


def request_permissions(
    method: str,
    path: str,
    path_params: Mapping[str, Any] | None = None,
    query: Sequence[tuple[str, Any]] | None = None,
) -> tuple[Permission, ...]:
    """The permissions a request needs, read from its method and path template as the API
    server's authorizer reads them (``POST /api/v1/namespaces/{namespace}/pods`` is create
    pods; ``GET …/pods/{name}/log`` get pods/log; ``GET /version/`` get on that URL).

    Raises:
        AccessRefused: a path this cannot read (refused rather than guessed).
    """
    params = path_params or {}
    parts = [str(params.get(p[1:-1], p)) if p.startswith("{") else p for p in path.strip("/").split("/")]
    if parts[0] == "api" and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    elif parts[0] not in ("api", "apis") and method == "GET":
        return (Permission("get", "", "/" + "/".join(parts)),)
    else:
        raise AccessRefused(f"{method} {path}: not a request airlock can read the permission of")
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise AccessRefused(f"{method} {path}: not a request airlock can read the permission of")
    resource, name, sub = [*rest, None, None][:3]
    verbs = _OBJECT_VERBS if name else _COLLECTION_VERBS
    verb = verbs.get(method)
    if verb is None or resource is None:
        raise AccessRefused(f"{method} {path}: not a request airlock can read the permission of")
    if verb == "list" and any(k == "watch" and str(v).lower() in ("true", "1") for k, v in query or ()):
        verb = "watch"
    full = f"{resource}/{sub}" if sub else resource
    needs = [Permission(verb, group, full, namespace, name)]
    if sub in _UPGRADES and method == "GET":
        needs.append(Permission("create", group, full, namespace, name))
    return tuple(needs)


def rules(grants: Iterable[Grant]) -> list[dict[str, Any]]:
    """RBAC rules for ``grants``: one per (group, resource, names), verbs in table order."""
    return _merge((g.group, g.resource, g.names, g.verb) for g in grants)


def chart_access() -> dict[str, Any]:
    """What the Helm chart renders its controller's Role and ClusterRole from, per connection
    mode: :data:`SANDBOX_ACCESS` and :data:`DOCTOR_ACCESS` minus what every identity has by
    default; a rule's ``resourceNames`` says which values name the objects
    (``runtime_classes``, ``sandbox_namespace``, ``image_pull_secrets``)."""
    out: dict[str, Any] = {}
    for mode in CONNECT_MODES:
        entries = [a for a in SANDBOX_ACCESS + DOCTOR_ACCESS if mode in a.modes and a.default_role is None]
        scopes = {
            "namespaced": [a for a in entries if not a.cluster and a.where == "sandbox"],
            "cluster": [a for a in entries if a.cluster],
            "pullSecretsFrom": [a for a in entries if a.where == "pull_secrets_from"],
        }
        out[mode] = {
            scope: _merge((a.group, a.resource, a.names, a.verb) for a in chosen)
            for scope, chosen in scopes.items()
        }
    return out


def _merge(entries: Iterable[tuple[str, str, Any, str]]) -> list[dict[str, Any]]:
    """(group, resource, names, verb) entries as rules, one per (group, resource, names)."""
    merged: dict[tuple[str, str, Any], list[str]] = {}
    for group, resource, names, verb in entries:
        verbs = merged.setdefault((group, resource, names), [])
        if verb not in verbs:
            verbs.append(verb)
    out: list[dict[str, Any]] = []
    for (group, resource, names), verbs in merged.items():
        rule: dict[str, Any] = {"apiGroups": [group], "resources": [resource], "verbs": verbs}
        if names:
            rule["resourceNames"] = list(names) if isinstance(names, tuple) else names
        out.append(rule)
    return out

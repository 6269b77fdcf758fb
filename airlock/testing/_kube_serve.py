"""The stand-in API server's request handling: routes, verbs, authorization, and each resource's REST.

:class:`ServerState` is everything a request reads or changes (the store, the pod runtime,
the token, denied verbs, injected faults, the request log); :class:`ApiHandler` answers one
HTTP connection from it. Paths are the real server's (``/api/v1/namespaces/{ns}/pods/{name}``,
``/apis/{group}/{version}/...``); answers are JSON objects, lists and ``Status`` objects as the
real server writes them (list items, as there, carry no ``kind``/``apiVersion``).
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import re
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ._kube_pods import EventRecorder, PodRuntime, SecretReader
from ._kube_portforward import PROTOCOL, relay_portforward
from ._kube_resources import RESOURCES, ApiError, Resource, resource_named
from ._kube_selectors import field_selector, label_selector
from ._kube_store import ObjectStore, now
from ._kube_websocket import WebSocket, accept_key

__all__ = ["GIT_VERSION", "USER", "ApiHandler", "ApiServer", "ServerState"]

GIT_VERSION = "v1.31.0-airlock-stand-in"
#: Who every request is authenticated as.
USER = "stand-in"
_PUBLIC = frozenset({"/version", "/healthz", "/readyz", "/livez"})
_SUBRESOURCES = {"pods": frozenset({"log", "status", "portforward"}), "namespaces": frozenset({"status"})}
_PODS, _SECRETS, _EVENTS = (resource_named(p) for p in ("pods", "secrets", "events"))
_RUNTIME_CLASSES = resource_named("runtimeclasses")
#: Resources whose DELETE answers the deleted object (as the real server does), not a Status.
_DELETE_ANSWERS_OBJECT = frozenset({"pods", "services"})


@dataclass(frozen=True)
class Route:
    """What a resource path names."""

    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None = None

    @property
    def rbac_resource(self) -> str:
        return f"{self.resource.plural}/{self.subresource}" if self.subresource else self.resource.plural


def parse_route(path: str) -> Route:
    """The route of a resource path.

    Raises:
        ApiError: 404 for a path the stand-in does not serve.
    """
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        version, rest = "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise ApiError.no_such_path()
    namespace = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (version == "v1" and rest[2] in ("status", "finalize"))
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise ApiError.no_such_path()
    resource = RESOURCES.get((version, rest[0]))
    if resource is None or (namespace is not None and not resource.namespaced):
        raise ApiError.no_such_path()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in _SUBRESOURCES.get(resource.plural, ()):
        raise ApiError.no_such_path()
    if resource.namespaced and namespace is None and name is not None:
        raise ApiError.no_such_path()
    return Route(resource, namespace, name, sub)


def _verb(method: str, route: Route, query: dict[str, str]) -> str:
    if query.get("watch") in ("true", "1"):
        raise ApiError.method_not_allowed("the stand-in does not serve watches")
    named = route.name is not None
    verbs = {
        ("GET", True): "get",
        ("GET", False): "list",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }
    verb = verbs.get((method, named))
    if verb is None or (route.subresource in ("log", "status") and verb != "get"):
        raise ApiError.method_not_allowed(
            f"the server does not allow this method on the requested resource ({method})"
        )
    if route.resource.virtual and verb != "create":
        raise ApiError.method_not_allowed(
            f"the server does not allow this method on the requested resource ({method})"
        )
    if route.resource.namespaced and route.namespace is None and verb != "list":
        raise ApiError.no_such_path()
    return verb


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    error: ApiError


@dataclass
class ServerState:
    """What the stand-in's requests share."""

    store: ObjectStore
    pods: PodRuntime
    token: str
    #: (verb, resource, namespace or None for every namespace), e.g. ("create", "pods/portforward", None).
    denied: set[tuple[str, str, str | None]] = field(default_factory=set)
    faults: list[_Fault] = field(default_factory=list)
    #: Every request received: (method, path without the query).
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    #: Seconds a pod deleted with a grace period stays (Terminating) before the kubelet's
    #: confirmation removes it (capped by the grace period); 0: removed at once.
    pod_termination_s: float = 0.0
    #: Pods being terminated: (namespace, name) -> when they are removed (monotonic seconds).
    terminating: dict[tuple[str, str], float] = field(default_factory=dict)
    #: Every DELETE of a named object, in order: (plural, name, gracePeriodSeconds or None).
    deletions: list[tuple[str, str, int | None]] = field(default_factory=list)
    #: Every object as it left the store (deleted, cascaded, or a terminated pod), in order.
    removals: list[tuple[str, str]] = field(default_factory=list)

    def allowed(self, verb: str, resource: str, namespace: str | None) -> bool:
        with self.lock:
            return not any(
                v in (verb, "*") and r == resource and ns in (None, namespace) for v, r, ns in self.denied
            )

    def add_fault(self, method: str, path_regex: str, error: ApiError) -> None:
        with self.lock:
            self.faults.append(_Fault(method.upper(), re.compile(path_regex), error))

    def take_fault(self, method: str, path: str) -> ApiError | None:
        with self.lock:
            for fault in self.faults:
                if fault.method in (method, "*") and fault.path.search(path):
                    self.faults.remove(fault)
                    return fault.error
        return None

    # -- what a pod's runtime gets ---------------------------------------------------

    def secret_reader(self, namespace: str) -> SecretReader:
        def read(name: str) -> dict[str, bytes] | None:
            found = self.store.find(_SECRETS, namespace, name)
            if found is None:
                return None
            return {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()}

        return read

    def event_recorder(self, pod: dict[str, Any]) -> EventRecorder:
        meta = pod["metadata"]

        def record(kind: str, reason: str, message: str) -> None:
            at = now()
            event = {
                "metadata": {
                    "name": f"{meta['name']}.{secrets.token_hex(8)}",
                    "namespace": meta["namespace"],
                },
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                    "resourceVersion": meta["resourceVersion"],
                },
                "type": kind,
                "reason": reason,
                "message": message,
                "source": {"component": "kubelet", "host": "stand-in-node"},
                "reportingComponent": "kubelet",
                "reportingInstance": "stand-in-node",
                "firstTimestamp": at,
                "lastTimestamp": at,
                "count": 1,
            }
            with contextlib.suppress(ApiError):  # the namespace is gone
                self.store.create(_EVENTS, meta["namespace"], event, validate=False)

        return record

    def with_status(self, pod: dict[str, Any]) -> dict[str, Any]:
        pod["status"] = self.pods.status(pod)
        return pod

    # -- deletion --------------------------------------------------------------------

    def removed(self, removed: list[tuple[Resource, dict[str, Any]]]) -> None:
        """Record objects that left the store; stop the pods among them (the kubelet's part)."""
        for resource, obj in removed:
            with self.lock:
                self.removals.append((resource.plural, str(obj["metadata"]["name"])))
                self.terminating.pop((str(obj["metadata"].get("namespace")), obj["metadata"]["name"]), None)
            if resource is _PODS:
                with contextlib.suppress(Exception):
                    obj["status"] = self.pods.status(obj)
                self.pods.delete(obj)

    def terminate(self, namespace: str, name: str, grace: int) -> dict[str, Any]:
        """Start a pod's graceful termination: it is marked (``deletionTimestamp``) and stays
        until its termination ends (:meth:`finish_terminations`); a copy as stored."""
        pod = self.store.mark_deleted(_PODS, namespace, name, grace)
        with self.lock:
            due = time.monotonic() + min(self.pod_termination_s, grace)
            self.terminating.setdefault((namespace, name), due)
        return pod

    def finish_terminations(self) -> None:
        """Remove the pods whose termination has ended."""
        with self.lock:
            done = [key for key, due in self.terminating.items() if due <= time.monotonic()]
            for key in done:
                del self.terminating[key]
        for namespace, name in done:
            with contextlib.suppress(ApiError):  # deleted meanwhile (force, cascade)
                self.removed(self.store.delete(_PODS, namespace, name))


class ApiServer(ThreadingHTTPServer):
    """The HTTP server: one thread per connection; knows its open connections (to end them)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), ApiHandler)

    def drop_connections(self) -> None:
        with self.connections_lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class ApiHandler(BaseHTTPRequestHandler):
    """One connection's requests (HTTP/1.1, kept alive)."""

    protocol_version = "HTTP/1.1"
    server: ApiServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the state's request log is the record."""

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # -- plumbing --------------------------------------------------------------------

    @property
    def state(self) -> ServerState:
        return self.server.state

    def _handle(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"  # the client asks for ``/version/``
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.state.requests.append((self.command, path))
        self.state.finish_terminations()
        try:
            self._authenticate(path)
            fault = self.state.take_fault(self.command, path)
            if fault is not None:
                raise fault
            self._dispatch(path, query, body)
        except ApiError as e:
            self._json(e.code, e.status())
        except Exception as e:  # a runtime's failure: what the real server answers as InternalError
            self._json(500, ApiError(500, "InternalError", f"Internal error occurred: {e}").status())

    def _authenticate(self, path: str) -> None:
        presented = self.headers.get("Authorization")
        if presented is None and path in _PUBLIC:
            return  # anonymous requests may read these, as on a real server
        scheme, _, token = (presented or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self.state.token.encode()
        ):
            raise ApiError.unauthorized()

    def _json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- dispatch --------------------------------------------------------------------

    def _dispatch(self, path: str, query: dict[str, str], body: bytes) -> None:
        if path in ("/healthz", "/readyz", "/livez"):
            self._text(200, "ok")
            return
        if path == "/version":
            self._json(200, _version())
            return
        route = parse_route(path)
        if route.subresource == "portforward":
            self._portforward(route, query)
            return
        verb = _verb(self.command, route, query)
        self._authorize(verb, route)
        if route.resource.plural == "selfsubjectaccessreviews":
            self._json(201, self._review(_decode(body)))
        elif route.subresource == "log":
            self._log(route, query)
        elif verb == "get":
            self._json(200, self._get(route))
        elif verb == "list":
            self._json(200, self._list(route, query))
        elif verb == "create":
            self._json(201, self._create(route, _decode(body)))
        elif verb == "update":
            self._json(
                200,
                self._read_back(
                    route.resource,
                    self.state.store.replace(route.resource, route.namespace, str(route.name), _decode(body)),
                ),
            )
        elif verb == "patch":
            content_type = self.headers.get("Content-Type") or ""
            patched = self.state.store.patch(
                route.resource, route.namespace, str(route.name), content_type, body
            )
            self._json(200, self._read_back(route.resource, patched))
        elif verb == "delete":
            self._json(200, self._delete(route, query, body))
        else:
            self._json(200, self._delete_collection(route, query))

    def _authorize(self, verb: str, route: Route) -> None:
        if self.state.allowed(verb, route.rbac_resource, route.namespace):
            return
        where = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
        why = (
            f'User "{USER}" cannot {verb} resource "{route.rbac_resource}" '
            f'in API group "{route.resource.group}" {where}'
        )
        raise ApiError.forbidden(route.resource, route.name or "", why)

    def _read_back(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        return self.state.with_status(obj) if resource is _PODS else obj

    # -- verbs -----------------------------------------------------------------------

    def _get(self, route: Route) -> dict[str, Any]:
        obj = self.state.store.get(route.resource, route.namespace, str(route.name))
        return self._read_back(route.resource, obj)

    def _selected(self, route: Route, query: dict[str, str]) -> list[dict[str, Any]]:
        labels = label_selector(query.get("labelSelector"))
        fields = field_selector(query.get("fieldSelector"), route.resource)
        found = [o for o in self.state.store.objects(route.resource, route.namespace) if labels(o)]
        return [o for o in (self._read_back(route.resource, o) for o in found) if fields(o)]

    def _list(
        self, route: Route, query: dict[str, str], items: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        resource = route.resource
        items = self._selected(route, query) if items is None else items
        for item in items:
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": self.state.store.resource_version},
            "items": items,
        }

    def _create(self, route: Route, body: dict[str, Any]) -> dict[str, Any]:
        resource, namespace = route.resource, route.namespace
        if resource is not _PODS:
            return self.state.store.create(resource, namespace, body)
        runtime_class = ((body.get("spec") or {}) if isinstance(body.get("spec"), dict) else {}).get(
            "runtimeClassName"
        )
        if runtime_class and self.state.store.find(_RUNTIME_CLASSES, None, str(runtime_class)) is None:
            name = str((body.get("metadata") or {}).get("name") or "")
            raise ApiError.forbidden(
                resource, name, f'pod rejected: RuntimeClass "{runtime_class}" not found'
            )
        pod = self.state.store.create(resource, namespace, body)
        self.state.pods.start(pod, self.state.secret_reader(str(namespace)), self.state.event_recorder(pod))
        return self.state.with_status(pod)

    def _delete(self, route: Route, query: dict[str, str], body: bytes) -> dict[str, Any]:
        options = _decode(body) if body.strip() else {}
        propagation = query.get("propagationPolicy") or options.get("propagationPolicy")
        given = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        grace = int(given) if given is not None else None
        name = str(route.name)
        with self.state.lock:
            self.state.deletions.append((route.resource.plural, name, grace))
        if route.resource is _PODS and self.state.pod_termination_s > 0:
            pod = self.state.store.get(_PODS, route.namespace, name)
            if grace is None:
                grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            if grace > 0:
                return self.state.with_status(self.state.terminate(str(route.namespace), name, grace))
        removed = self.state.store.delete(route.resource, route.namespace, name, propagation=propagation)
        target = removed[0][1]
        self.state.removed(removed)
        if route.resource.plural in _DELETE_ANSWERS_OBJECT:
            return target
        if route.resource.plural == "namespaces":
            target["metadata"]["deletionTimestamp"] = now()
            target["status"] = {"phase": "Terminating"}
            return target
        meta = target["metadata"]
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": meta["name"],
                "group": route.resource.group,
                "kind": route.resource.plural,
                "uid": meta["uid"],
            },
        }

    def _delete_collection(self, route: Route, query: dict[str, str]) -> dict[str, Any]:
        deleted = []
        for obj in self._selected(route, query):
            meta = obj["metadata"]
            with contextlib.suppress(ApiError):  # taken by an earlier one's cascade
                removed = self.state.store.delete(route.resource, meta.get("namespace"), meta["name"])
                self.state.removed(removed)
                deleted.append(obj)
        return self._list(route, query, deleted)

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.get("spec")
        if not isinstance(spec, dict):
            raise ApiError.invalid(
                resource_named("selfsubjectaccessreviews"), "", [("spec", "Required value")]
            )
        attrs = spec.get("resourceAttributes")
        if isinstance(attrs, dict):
            resource = str(attrs.get("resource") or "")
            if attrs.get("subresource"):
                resource += f"/{attrs['subresource']}"
            allowed = self.state.allowed(
                str(attrs.get("verb") or ""), resource, attrs.get("namespace") or None
            )
        else:
            allowed = True  # non-resource URLs
        status: dict[str, Any] = {"allowed": allowed}
        status["reason"] = "allowed by the stand-in" if allowed else "denied by the stand-in's RBAC (deny())"
        return {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": now()},
            "spec": spec,
            "status": status,
        }

    # -- pods/log --------------------------------------------------------------------

    def _log(self, route: Route, query: dict[str, str]) -> None:
        pod = self._get(route)
        name = pod["metadata"]["name"]
        container = _log_container(pod, query.get("container"))
        states = {
            c.get("name"): c.get("state") or {}
            for c in [
                *(pod["status"].get("initContainerStatuses") or []),
                *(pod["status"].get("containerStatuses") or []),
            ]
        }
        waiting = states.get(container, {"waiting": {"reason": "ContainerCreating"}}).get("waiting")
        if waiting is not None:
            raise ApiError.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {waiting.get("reason", "")}'
            )
        try:
            tail = int(query["tailLines"]) if query.get("tailLines") else None
        except ValueError as e:
            raise ApiError.bad_request(f"invalid tailLines: {query['tailLines']!r}") from e
        follow = query.get("follow") in ("true", "1")
        chunks = self.state.pods.logs(pod, container, follow=follow, tail_lines=tail)
        if not follow:
            self._text(200, b"".join(chunks).decode("utf-8", errors="replace"))
            return
        self._stream(chunks)

    def _stream(self, chunks: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                if self.state.stopping.is_set() or (not chunk and _client_gone(self.connection)):
                    self.close_connection = True
                    return
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    # -- pods/portforward ------------------------------------------------------------

    def _portforward(self, route: Route, query: dict[str, str]) -> None:
        if self.command not in ("GET", "POST"):
            raise ApiError.method_not_allowed(f"the server does not allow this method ({self.command})")
        for verb in ("create", "get"):
            self._authorize(verb, route)
        pod = self._get(route)
        conditions = {c.get("type"): c.get("status") for c in pod["status"].get("conditions") or []}
        if conditions.get("PodScheduled") != "True":
            raise ApiError.bad_request(f"pod {route.name} does not have a host assigned")
        if (self.headers.get("Upgrade") or "").lower() != "websocket":
            raise ApiError.bad_request("Upgrade request required")
        offered = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
        key = self.headers.get("Sec-WebSocket-Key")
        if PROTOCOL not in offered or not key or self.headers.get("Sec-WebSocket-Version") != "13":
            raise ApiError.bad_request(
                f"the stand-in's port-forward speaks only WebSocket version 13 with subprotocol {PROTOCOL}"
            )
        try:
            ports = [int(p) for p in query.get("ports", "").split(",") if p.strip()]
        except ValueError as e:
            raise ApiError.bad_request(f"invalid port in {query.get('ports')!r}") from e
        if not ports or any(not 0 < p < 65536 for p in ports):
            raise ApiError.bad_request("at least one port (1-65535) is required in the ports query parameter")
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept_key(key))
        self.send_header("Sec-WebSocket-Protocol", PROTOCOL)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        uid = pod["metadata"]["uid"]
        relay_portforward(
            WebSocket(self.rfile.read, self.connection),
            ports,
            lambda port: self.state.pods.connect(pod, port),
            lambda port: f"error forwarding port {port} to pod {route.name}, uid {uid}",
        )


def _decode(body: bytes) -> dict[str, Any]:
    try:
        decoded = json.loads(body or b"null")
    except ValueError as e:
        raise ApiError.bad_request(f"couldn't get version/kind; json parse error: {e}") from e
    if not isinstance(decoded, dict):
        raise ApiError.bad_request("the request body must be a JSON object")
    return decoded


def _log_container(pod: dict[str, Any], requested: str | None) -> str:
    name = pod["metadata"]["name"]
    containers = [str(c["name"]) for c in pod["spec"].get("containers") or []]
    inits = [str(c["name"]) for c in pod["spec"].get("initContainers") or []]
    if requested is None:
        if len(containers) == 1:
            return containers[0]
        message = (
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        )
        if inits:
            message += f" or one of the init containers: [{' '.join(inits)}]"
        raise ApiError.bad_request(message)
    if requested not in containers + inits:
        raise ApiError.bad_request(f"container {requested} is not valid for pod {name}")
    return requested


def _client_gone(sock: socket.socket) -> bool:
    """Whether the peer closed ``sock`` (it reads as the end)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _version() -> dict[str, str]:
    return {
        "major": "1",
        "minor": "31",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-08-13T00:00:00Z",
        "goVersion": "go1.22.5",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


Validator = Callable[[Resource, dict[str, Any]], None]


def schema_validator(version: str = "1.31") -> Validator:
    """Validation against the official schemas (strict: unknown fields are errors) as a 422."""

    def validate(resource: Resource, obj: dict[str, Any]) -> None:
        import kubernetes_validate  # a development dependency: imported only when validating

        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".")
            raise ApiError.invalid(
                resource, str(obj["metadata"].get("name") or ""), [(where, str(e.message))]
            ) from e

    return validate

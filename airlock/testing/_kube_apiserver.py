"""A stand-in Kubernetes API server: real HTTP and the real REST wire format, no cluster behind it.

The official ``kubernetes`` client talks to :class:`KubeApiStandIn` as to a real API server
(a kubeconfig with a bearer token, JSON bodies, ``Status`` errors, the WebSocket port-forward),
so a backend is tested through the client it uses in production.

**What it emulates** (each as the real server answers it, codes and ``Status`` reasons included):

* Bearer-token authentication (401 without the token; ``/version``, ``/healthz``, ``/readyz``
  and ``/livez`` also answer anonymous requests).
* Resources: ``namespaces``, ``pods`` (with ``log``, ``status`` and ``portforward``),
  ``secrets``, ``events`` (core/v1); ``networkpolicies`` (networking.k8s.io/v1);
  ``runtimeclasses`` (node.k8s.io/v1); ``leases`` (coordination.k8s.io/v1);
  ``selfsubjectaccessreviews`` (authorization.k8s.io/v1); ``/version``. Anything else is a 404.
* Verbs get, list, create, update (PUT), patch (merge, strategic merge as merge, JSON patch),
  delete and deletecollection; label and field selectors on lists; ``uid``,
  ``resourceVersion``, ``creationTimestamp``, ``generation``; 404 NotFound, 409 AlreadyExists,
  409 Conflict on a stale resourceVersion, 422 Invalid (names, and with ``validate_schemas``
  the official 1.31 schemas, strict), 400 BadRequest for malformed bodies.
* Admission: the RuntimeClass plugin's rejection of a pod naming a RuntimeClass that does not
  exist (403), and the namespace having to exist (404).
* Authorization: everything is allowed except what :meth:`KubeApiStandIn.deny` denies (403,
  and ``allowed: false`` in a SelfSubjectAccessReview). Port-forward needs ``create`` and
  ``get`` on ``pods/portforward`` (a WebSocket upgrade is a GET; newer servers check create).
* Garbage collection: deleting an object deletes, at once and recursively, the objects it
  leaves without a live owner (the background cascade; ``propagationPolicy=Orphan`` strips the
  references). Deleting a namespace deletes everything in it at once.
* Pods are run by a :class:`~airlock.testing.PodRuntime` (``ScriptedPods`` by default; the
  kubelet's part): started on create, their ``status`` read from it on every read, their log
  and port-forward served from it, deleted when the object is.
* Port-forward over a WebSocket (``v4.channel.k8s.io``), as the official client speaks it.
* Graceful pod deletion, when ``pod_termination_s`` is set: a pod deleted with a grace period
  (``gracePeriodSeconds`` > 0, or none given: the pod's ``terminationGracePeriodSeconds``,
  default 30) stays readable as Terminating (``deletionTimestamp`` and
  ``deletionGracePeriodSeconds`` set, its containers still running) for ``pod_termination_s``
  seconds (at most its grace period), the time its kubelet would take to stop it and confirm;
  then it is removed (and its runtime stops it). A deletion with grace 0 removes it at
  once, and so does the garbage collector's cascade. Without ``pod_termination_s`` (the
  default) every deleted pod is gone at once. Other kinds are always removed at once.
  :attr:`KubeApiStandIn.deletions` and :attr:`KubeApiStandIn.removals` record, in order,
  each DELETE (with its grace period) and each object's actual removal.

**What it does not**: TLS (plain HTTP on 127.0.0.1); scheduling, nodes, and resource quotas or
limit ranges; defaulting of pod specs and any admission beyond the above (no ServiceAccount
token mounting, no Pod Security admission, no RuntimeClass overhead or scheduling); pod update
restrictions; the namespace ``Terminating`` phase (only shown in the DELETE answer); watches
(405); ``limit``/``continue`` paging (every list is whole); server-side apply (415); real RBAC
(roles and bindings are not resources here); enforcement of NetworkPolicies (stored, never
applied: that is a CNI plugin's work); exec, attach and the SPDY transports; API discovery
(``/api``, ``/apis``); protobuf and CBOR; managedFields.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from ._kube_pods import PodRuntime, ScriptedPods
from ._kube_resources import ApiError, resource_named
from ._kube_serve import ApiServer, ServerState, schema_validator
from ._kube_store import ObjectStore

__all__ = ["KubeApiStandIn"]


class KubeApiStandIn:
    """A stand-in Kubernetes API server on 127.0.0.1 (a random port), served from a background thread.

    A sync context manager (or :meth:`start`/:meth:`stop`). Stopping also closes the pod
    runtime (every pod it runs is removed).
    """

    def __init__(
        self,
        *,
        pods: PodRuntime | None = None,
        namespaces: tuple[str, ...] = ("default",),
        runtime_classes: Mapping[str, str] | None = None,
        validate_schemas: bool = True,
        token: str | None = None,
        pod_termination_s: float = 0.0,
    ) -> None:
        #: What runs the pods (the kubelet's part).
        self.pods: PodRuntime = pods if pods is not None else ScriptedPods()
        self._token = token or secrets.token_urlsafe(24)
        store = ObjectStore(schema_validator() if validate_schemas else None)
        self._state = ServerState(
            store=store, pods=self.pods, token=self._token, pod_termination_s=pod_termination_s
        )
        self._server: ApiServer | None = None
        self._thread: threading.Thread | None = None
        for name in namespaces:
            self.add_namespace(name)
        for name, handler in (runtime_classes or {}).items():
            self.add_runtime_class(name, handler)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Listen and serve (idempotent)."""
        if self._server is not None:
            return
        self._state.stopping.clear()
        self._server = ApiServer(self._state)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="kube-api-stand-in",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, end open connections (log streams, port-forwards), close the pod runtime."""
        server, self._server = self._server, None
        if server is None:
            return
        self._state.stopping.set()
        server.shutdown()
        self.pods.close()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- how clients reach it --------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (once started)."""
        if self._server is None:
            raise RuntimeError("the stand-in API server is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def token(self) -> str:
        """The bearer token every request must carry."""
        return self._token

    def write_kubeconfig(
        self, path: str | Path, *, context: str = "stand-in", namespace: str | None = None
    ) -> Path:
        """A kubeconfig for this server (bearer-token user; ``namespace`` as the context's default)."""
        ctx: dict[str, Any] = {"cluster": "stand-in", "user": "stand-in"}
        if namespace:
            ctx["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": self.url}}],
            "users": [{"name": "stand-in", "user": {"token": self._token}}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context,
            "preferences": {},
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return target

    def configuration(self) -> Any:
        """A ``kubernetes.client.Configuration`` for this server."""
        from kubernetes import client

        return client.Configuration(
            host=self.url, api_key={"BearerToken": self._token}, api_key_prefix={"BearerToken": "Bearer"}
        )

    # -- what tests control ----------------------------------------------------------

    def deny(self, verb: str, resource: str, namespace: str | None = None) -> None:
        """Answer ``verb`` on ``resource`` (``"pods"``, ``"pods/portforward"``, ``"leases"``; ``"*"``
        for every verb) with 403 Forbidden, in ``namespace`` or (None) everywhere."""
        with self._state.lock:
            self._state.denied.add((verb, resource, namespace))

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        reason: str = "InternalError",
        message: str = "injected failure",
    ) -> None:
        """The next request of ``method`` (``"*"``: any) whose path matches ``path_regex``
        (``re.search``, query excluded) fails once with this Status."""
        self._state.add_fault(method, path_regex, ApiError(status, reason, message))

    def add_namespace(self, name: str) -> None:
        """Create a namespace (no authorization, no fault)."""
        self._state.store.create(resource_named("namespaces"), None, {"metadata": {"name": name}})

    def add_runtime_class(self, name: str, handler: str) -> None:
        """Create a RuntimeClass ``name`` with ``handler`` (no authorization, no fault)."""
        body = {"metadata": {"name": name}, "handler": handler}
        self._state.store.create(resource_named("runtimeclasses"), None, body)

    # -- what tests inspect ----------------------------------------------------------

    @property
    def requests(self) -> list[tuple[str, str]]:
        """Every request received, in order: (method, path without the query)."""
        return list(self._state.requests)

    @property
    def deletions(self) -> list[tuple[str, str, int | None]]:
        """Every DELETE of a named object, in order: (plural, name, its ``gracePeriodSeconds``
        or None when it gave none)."""
        with self._state.lock:
            return list(self._state.deletions)

    @property
    def removals(self) -> list[tuple[str, str]]:
        """Every object as it actually left the store, in order: (plural, name); a pod deleted
        gracefully appears once its termination ended."""
        self._state.finish_terminations()
        with self._state.lock:
            return list(self._state.removals)

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored objects of ``resource`` (a plural: ``"pods"``), in ``namespace`` or everywhere.

        Pods carry the status their runtime reports now.
        """
        self._state.finish_terminations()
        kind = resource_named(resource)
        found = self._state.store.objects(kind, namespace)
        return [self._state.with_status(o) for o in found] if resource == "pods" else found

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """One stored object (None when there is none); a pod with its current status."""
        self._state.finish_terminations()
        found = self._state.store.find(resource_named(resource), namespace, name)
        if found is not None and resource == "pods":
            return self._state.with_status(found)
        return found

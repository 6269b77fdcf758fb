"""The cluster, through the official ``kubernetes`` client, called from threads.

Why threads and not ``kubernetes_asyncio``: the official client is the one the Kubernetes
project maintains and releases with each minor version (37.x refuses unknown fields before
they reach the server); the asyncio port is a separate community project that trails it. A
sandbox makes a bounded handful of short calls (create, read, delete) plus one log stream,
so a thread per call (``asyncio.to_thread``) costs nothing that matters, and nothing blocking
runs on the event loop.

Objects travel as plain dicts both ways (the renderers' output goes in as the body; reads use
``_preload_content=False`` and are decoded as JSON), so what the backend reasons about is the
wire format, not the client's model classes.

Every request is checked against the access table the client was connected with (see
``_access.py``) before it is built into HTTP: its verb and resource are read from the method
and path the client's generated code passes, as the API server's authorizer reads them, so no
call (a plain one, the proxy's log stream, a port-forward's WebSocket) reaches the server
unless the table lists it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from layer0 import EnvError

from ._access import AccessRefused, AccessTable, ConnectMode, Grants, resolve
from ._settings import KubernetesSettings

__all__ = ["ApiFailure", "KubeApi", "configured", "connect_mode", "in_cluster", "own_namespace"]

_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account token."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SERVICE_ACCOUNT / "token").is_file()


def configured(settings: BaseModel | None) -> bool:
    """Whether any cluster is configured: settings given, in a cluster, or a kubeconfig file
    (``$KUBECONFIG`` or ``~/.kube/config``) exists."""
    if settings is not None or in_cluster():
        return True
    path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    return any(Path(p).is_file() for p in path.split(os.pathsep) if p)


def own_namespace() -> str | None:
    """The namespace of this process's pod (None outside a cluster)."""
    try:
        return (_SERVICE_ACCOUNT / "namespace").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def connect_mode(settings: KubernetesSettings) -> ConnectMode:
    """How the controller reaches a runner: ``auto`` is the pod IP in a cluster, else port-forward."""
    if settings.connect == "auto":
        use_cluster = settings.in_cluster if settings.in_cluster is not None else in_cluster()
        return "pod_ip" if use_cluster else "port_forward"
    return settings.connect


@dataclass(frozen=True)
class ApiFailure(Exception):
    """An API server answer other than success: its HTTP status, reason and message."""

    status: int
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.status} {self.reason}: {self.message}"


class KubeApi:
    """One cluster's APIs, limited to one access table; every call runs in a thread and fails
    as :class:`ApiFailure` (or :class:`AccessRefused`, before any request, outside the table)."""

    def __init__(self, api_client: Any) -> None:
        """``api_client``: from :func:`checked_client` (a plain ApiClient is refused: unchecked)."""
        from kubernetes import client

        if not isinstance(getattr(api_client, "grants", None), Grants):
            raise TypeError("KubeApi needs an ApiClient that checks its access table (checked_client)")
        self.api_client = api_client
        self.grants: Grants = api_client.grants
        self.core = client.CoreV1Api(api_client)
        self.networking = client.NetworkingV1Api(api_client)
        self.node = client.NodeV1Api(api_client)
        self.storage = client.StorageV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.authorization = client.AuthorizationV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self.version = client.VersionApi(api_client)
        self._forward_lock = threading.Lock()
        self._forward_core: Any = None

    @classmethod
    async def connect(
        cls,
        settings: KubernetesSettings,
        access: AccessTable,
        *,
        namespace: str | None = None,
    ) -> KubeApi:
        """The cluster ``settings`` name (in-cluster or from a kubeconfig), limited to
        ``access`` for the settings' connection mode, namespaced entries in ``namespace``
        (default: the sandbox namespace).

        Raises:
            EnvError: ``provision_failed`` when no configuration can be loaded.
        """
        grants = resolve(access, settings, connect_mode(settings), namespace=namespace)
        return cls(await asyncio.to_thread(_api_client, settings, grants))

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a thread; a JSON answer decoded to a dict.

        Raises:
            ApiFailure: the server answered with an error status (or could not be reached: 0).
            AccessRefused: the call is not in the access table (nothing was sent).
        """
        return await asyncio.to_thread(self.call_blocking, fn, *args, **kwargs)

    def call_blocking(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`call` without the thread (for code already in one)."""
        from kubernetes.client.exceptions import ApiException

        try:
            response = fn(*args, _preload_content=False, **kwargs)
        except ApiException as e:
            raise _failure(e) from e
        except AccessRefused:
            raise
        except Exception as e:  # urllib3 connection errors, TLS, …
            raise ApiFailure(0, "Unreachable", f"{type(e).__name__}: {e}") from e
        data = response.data
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError:
            return {"text": data.decode("utf-8", errors="replace")}

    def port_forward_blocking(self, pod: str, namespace: str, port: int) -> Any:
        """One port-forward WebSocket to ``pod``'s ``port`` (the client's ``PortForward``; blocking).

        The client's WebSocket helper swaps its ApiClient's transport while it connects, so
        a call made meanwhile from another thread would go out as a WebSocket: forwards use
        an ApiClient of their own, and connect one at a time.
        """
        from kubernetes import client
        from kubernetes.stream import portforward

        with self._forward_lock:
            if self._forward_core is None:
                forward_client = checked_client(self.api_client.configuration, self.grants)
                self._forward_core = client.CoreV1Api(forward_client)
            return portforward(
                self._forward_core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
            )

    def close(self) -> None:
        """Release the connection pools."""
        self.api_client.close()
        if self._forward_core is not None:
            self._forward_core.api_client.close()


def checked_client(configuration: Any, grants: Grants) -> Any:
    """An ApiClient for ``configuration`` that refuses, before building it, any request
    ``grants`` does not allow (every generated method passes through ``param_serialize``,
    the WebSocket transports included)."""
    from kubernetes import client

    class _CheckedClient(client.ApiClient):
        #: What this client may ask (read by KubeApi and doctor).
        grants: Grants

        def param_serialize(self, method: str, resource_path: str, *args: Any, **kwargs: Any) -> Any:
            params = kwargs.get("path_params", args[0] if args else None)
            query = kwargs.get("query_params", args[1] if len(args) > 1 else None)
            grants.check_request(method, resource_path, params, query)
            return super().param_serialize(method, resource_path, *args, **kwargs)

    checked = _CheckedClient(configuration)
    checked.grants = grants
    return checked


def _api_client(settings: KubernetesSettings, grants: Grants) -> Any:
    from kubernetes import client, config

    try:
        configuration = type.__call__(client.Configuration)  # not a copy of the process default
        use_cluster = settings.in_cluster if settings.in_cluster is not None else in_cluster()
        if use_cluster:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            # $KUBECONFIG is read now (the client reads it once, at import).
            path = settings.kubeconfig or os.environ.get("KUBECONFIG") or None
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=settings.context, client_configuration=configuration
            )
        return checked_client(configuration, grants)
    except Exception as e:  # ConfigException, a missing or unreadable kubeconfig
        where = "the pod's service account" if settings.in_cluster else (settings.kubeconfig or "$KUBECONFIG")
        raise EnvError.provision_failed(f"cannot load the Kubernetes configuration from {where}: {e}") from e


def _failure(e: Any) -> ApiFailure:
    """The Status the server sent (reason and message), else the HTTP status line."""
    status = int(getattr(e, "status", 0) or 0)
    reason = str(getattr(e, "reason", "") or "")
    message = reason
    body = getattr(e, "body", None)
    if body:
        try:
            decoded = json.loads(body)
        except (TypeError, ValueError):
            message = str(body)[:500]
        else:
            reason = str(decoded.get("reason") or reason)
            message = str(decoded.get("message") or message)
    return ApiFailure(status, reason, message)

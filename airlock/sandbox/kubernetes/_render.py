"""A compiled plan → the Kubernetes objects of one sandbox, as pure functions (no cluster).

Each renderer returns a plain JSON-able dict, the shape ``kubectl apply -f`` takes. The
objects keep the Docker backend's meaning (:mod:`airlock.sandbox.docker`):

* **Sandbox pod** (the runner): non-root (65534), read-only root, every capability dropped,
  no privilege escalation, the runtime's default seccomp profile, no service-account token,
  no service links, no host namespaces, never a hostPath. ``/workspace`` and ``/tmp`` are
  size-limited emptyDirs (tmpfs, like Docker's; ``/workspace`` on node disk with
  ``workspace_medium: Disk``). CPU and memory requests equal their limits.
* **Token, read once:** the runner token lives in the sandbox's Secret, mounted only into
  the init container ``token``, which copies it (0400, ``O_EXCL``) onto an in-memory
  emptyDir shared with the runner; the runner reads and deletes it (``--token-file-delete``),
  as on Docker. The runner container never mounts the Secret's token.
* **Runner TLS:** the controller→runner channel is TLS with a certificate made for this
  sandbox alone and pinned by the controller (:mod:`._runner_tls`): its certificate and key
  live in the sandbox's Secret, mounted read-only (0400) into the runner alone, which serves
  with ``--tls-cert/--tls-key``.
* **Credentials:** ``env_var`` ones as ``secretKeyRef`` env, ``file`` ones as read-only
  0400 files from the same Secret; ``sidecar`` secrets only ever in the proxy's Secret.
* **Proxy pod** (the proxy bundle, our code: no RuntimeClass, like Docker's proxy container
  on runc) hardened the same way, configured by a :class:`~airlock.proxy.bundle.BundleConfig`
  in its own Secret. The sandbox reaches it by pod IP (``HTTP(S)_PROXY``; credential proxies
  directly), so the sandbox needs no DNS at all.
* **NetworkPolicies:** the sandbox pod accepts only the controller's pods on the runner port
  and may reach only its proxy pod (nothing at all when the plan allows nothing). The proxy
  pod accepts only its sandbox pod and may reach what the plan allows, as precisely as a
  NetworkPolicy can say it: cluster DNS only when a name must resolve, CIDR rules as
  ipBlocks, in-cluster Service rules as namespace/pod selector peers on the pods' port, name
  rules (and ``default: allow``) as every public address — never a special range (private,
  loopback, link-local/metadata, ...) unless a CIDR rule inside it grants it.
  The proxy enforces names, deny rules and the rest.

**Placement:** both pods get the settings' ``node_selector`` with the agent's
(:class:`~airlock.sandbox.Placement`) merged over it (the agent wins per key), and the
settings' tolerations followed by the agent's; the agent's RuntimeClass goes on the sandbox
pod alone, and only in place of none (``container`` isolation).

Kubernetes has no per-pod pid limit field: the kubelet's ``podPidsLimit`` sets it for every
pod of a node, so :attr:`~airlock.sandbox._limits.Limits.pids` is not rendered here.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from airlock.policy import ResolvedCredentials, SandboxPlan
from airlock.policy.decision import SPECIAL_RANGES, IPNetwork, net_within
from airlock.policy.plan import EgressRule
from airlock.proxy.bundle import EVERY_FAMILY, BundleConfig, CredentialListener
from layer0 import EnvError

from .._limits import Limits
from .._placement import Placement
from ._dns import NAMESPACE_LABEL, dns_egress_rule
from ._names import (
    CREDENTIAL_PORT_BASE,
    DEFAULT_DENY_POLICY,
    EGRESS_PORT,
    LABEL_MANAGED,
    LABEL_POOL,
    MANAGED_BY,
    RUNNER_PORT,
    Owner,
    Role,
    object_name,
    sandbox_labels,
    sandbox_selector,
)
from ._runner_tls import RunnerCertificate
from ._settings import KubernetesSettings

__all__ = [
    "SandboxShape",
    "bundle_config",
    "credential_ports",
    "hardened_container_security",
    "hardened_pod_spec",
    "needs_proxy",
    "no_dns",
    "proxy_urls",
    "render_default_deny",
    "render_network_policies",
    "render_pod",
    "render_proxy_pod",
    "render_proxy_secret",
    "render_secret",
]

#: Where the runner listens in its pod: gRPC binds ``[::]`` dual-stack (IPv4 alone on a node
#: without IPv6), so the runner answers at the pod's IP on IPv4, IPv6 and dual-stack clusters.
RUNNER_LISTEN = f"[::]:{RUNNER_PORT}"
#: The sandbox user (as on Docker): ``nobody``.
SANDBOX_UID = 65534
PYTHON = "/opt/venv/bin/python"
WORKSPACE = "/workspace"
#: The runner's control directory (the token copy), shared by the init container and the runner.
CONTROL_DIR = "/run/airlock"
TOKEN_FILE = f"{CONTROL_DIR}/token"
#: Where the init container sees the sandbox Secret's token.
SECRET_DIR = "/run/airlock-secret"
#: Where the runner sees its certificate and key (from the sandbox Secret).
RUNNER_TLS_DIR = "/run/airlock-tls"
#: Where the proxy pod sees its Secret (bundle config, sidecar secrets).
PROXY_DIR = "/run/airlock-proxy"
PROXY_CONFIG = f"{PROXY_DIR}/config.json"
_READ_ONLY = 0o400

#: The init container's program: copy the token once, 0400, refusing to follow or overwrite.
_COPY_TOKEN = f"""\
import os
with open("{SECRET_DIR}/token", "rb") as src:
    token = src.read()
fd = os.open("{TOKEN_FILE}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
with os.fdopen(fd, "wb") as dst:
    dst.write(token)
"""


@dataclass(frozen=True)
class SandboxShape:
    """Everything the renderers need about one sandbox (never a secret value)."""

    sandbox_id: str
    namespace: str
    owner: Owner
    settings: KubernetesSettings
    #: The runner image (also the proxy's, unless the settings name another).
    image: str
    plan: SandboxPlan
    limits: Limits
    #: None: the cluster's default runtime.
    runtime_class: str | None
    #: The pods' ``activeDeadlineSeconds`` (None: none).
    active_deadline_s: int | None
    #: Where the controller's pods run (the only peers allowed into the runner's port).
    controller_namespace: str
    #: A warm pool member's shape id (its objects' :data:`~._names.LABEL_POOL`); None: a cold start.
    pool: str | None = None
    #: ``host:port`` addresses the runner tries before its first turn and refuses to run a
    #: turn if one connects (the cloud metadata service, the API server: ``--fence``).
    fence: tuple[str, ...] = ()
    #: The agent's placement: its node selector merged over the settings' (the agent wins per
    #: key), its tolerations after the settings' (both pods); its RuntimeClass for the sandbox
    #: pod alone, and only when :attr:`runtime_class` is None (``container`` isolation).
    placement: Placement = field(default_factory=Placement)

    def sandbox_runtime_class(self) -> str | None:
        """The sandbox pod's RuntimeClass: the isolation's, else the placement's.

        Raises:
            ValueError: both name one (a stronger boundary's RuntimeClass is never replaced).
        """
        if self.runtime_class is not None and self.placement.runtime_class is not None:
            raise ValueError(
                f"placement.runtime_class {self.placement.runtime_class!r} would replace the isolation's "
                f"RuntimeClass {self.runtime_class!r}"
            )
        return self.runtime_class or self.placement.runtime_class


# --- the proxy's ports and URLs ------------------------------------------------------------


def needs_proxy(plan: SandboxPlan) -> bool:
    """Whether the sandbox gets a proxy pod: any egress allowed, or a sidecar credential."""
    return plan.needs_egress_proxy or bool(plan.sidecars)


def credential_ports(plan: SandboxPlan) -> dict[str, int]:
    """Each sidecar credential's port on the proxy pod, by credential name."""
    return {c.name: CREDENTIAL_PORT_BASE + i for i, c in enumerate(plan.sidecars)}


def proxy_urls(plan: SandboxPlan, proxy_ip: str) -> dict[str, str]:
    """Each sidecar credential's proxy URL as the sandbox reaches it (the proxy pod's IP)."""
    host = _url_host(proxy_ip)
    return {name: f"http://{host}:{port}" for name, port in credential_ports(plan).items()}


def _url_host(ip: str) -> str:
    """``ip`` as a URL's host: an IPv6 address in brackets (``[fd00:10:244::5]``)."""
    return f"[{ip}]" if ":" in ip else ip


def bundle_config(shape: SandboxShape) -> BundleConfig:
    """The proxy bundle's config: no secret values, only the files in the proxy Secret's mount.

    ``clients`` is empty (any peer): the proxy pod's NetworkPolicy admits only the sandbox pod.
    It listens on every address family (the pod's IP may be IPv6). Events go to stdout: the
    controller follows the proxy pod's log.
    """
    plan = shape.plan
    ports = credential_ports(plan)
    listeners = []
    for c in plan.sidecars:
        assert c.route is not None
        port = ports[c.name]
        listeners.append(
            CredentialListener(
                credential=c.name, route=c.route, port=port, secret_file=f"{PROXY_DIR}/secret-{port}"
            )
        )
    egress = plan.egress
    if any(r.service is not None for r in egress.rules):  # Service names are the cluster's
        cluster = {"cluster_domain": shape.settings.cluster_domain, "cluster_namespace": shape.namespace}
        egress = egress.model_copy(update=cluster)
    return BundleConfig(
        host=EVERY_FAMILY,
        egress_port=EGRESS_PORT,
        plan=egress,
        credentials=tuple(listeners),
        clients=(),
        events=("stdout",),
    )


# --- shared pieces -------------------------------------------------------------------------


def _metadata(shape: SandboxShape, role: Role) -> dict[str, Any]:
    labels = sandbox_labels(shape.sandbox_id, role, shape.owner)
    if shape.pool is not None:
        labels[LABEL_POOL] = shape.pool
    return {
        "name": object_name(shape.sandbox_id, role),
        "namespace": shape.namespace,
        "labels": labels,
        "ownerReferences": [shape.owner.reference()],
    }


def _container_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": SANDBOX_UID,
        "runAsGroup": SANDBOX_UID,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _pod_spec(shape: SandboxShape, *, runtime_class: str | None) -> dict[str, Any]:
    """The hardened pod spec both pods share (containers and volumes added by the caller)."""
    settings = shape.settings
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "shareProcessNamespace": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SANDBOX_UID,
            "runAsGroup": SANDBOX_UID,
            "fsGroup": SANDBOX_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    # runc pods: no RuntimeClass, or a placement's under ``container`` isolation (e.g. NVIDIA's
    # runc): never dropped for it; gVisor and Kata have their own boundary.
    placed = shape.runtime_class is None and runtime_class == shape.placement.runtime_class
    if settings.user_namespaces and (runtime_class is None or placed):
        spec["hostUsers"] = False
    if shape.active_deadline_s is not None:
        spec["activeDeadlineSeconds"] = shape.active_deadline_s
    node_selector, tolerations = shape.placement.over(settings.node_selector, settings.tolerations)
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = [t.manifest() for t in tolerations]
    if settings.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    return spec


def no_dns(spec: dict[str, Any]) -> None:
    """Point the pod's resolver at nothing, so a name fails in ~2 s (as on Docker), not after
    the NetworkPolicy's drops time out."""
    spec["dnsPolicy"] = "None"
    spec["dnsConfig"] = {
        "nameservers": ["127.0.0.1"],
        "options": [{"name": "timeout", "value": "1"}, {"name": "attempts", "value": "1"}],
    }


def _memory_dir(name: str, size: int | str) -> dict[str, Any]:
    return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": str(size)}}


def _base_env() -> list[dict[str, Any]]:
    """The environment every container starts from (fresh dicts: no object is shared)."""
    return [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}]


def _b64(value: str) -> str:
    return base64.b64encode(value.encode("utf-8")).decode("ascii")


# --- the sandbox pod -----------------------------------------------------------------------


def _resources(shape: SandboxShape) -> dict[str, Any]:
    limits = shape.limits
    amounts: dict[str, str] = {
        "cpu": f"{limits.nano_cpus // 10**6}m",
        "memory": str(limits.memory_bytes),
    }
    if limits.gpus == -1:
        raise EnvError.resource_exceeded(
            "gpu: the spec asks for 'all' GPUs, which a Kubernetes pod cannot request; "
            "ask for a number of GPUs (e.g. gpu: '1')"
        )
    if limits.gpus is not None:
        amounts["nvidia.com/gpu"] = str(limits.gpus)
    if shape.settings.workspace_medium == "Disk":
        amounts["ephemeral-storage"] = str(limits.disk_bytes)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _proxy_env(plan: SandboxPlan, proxy_ip: str | None) -> list[dict[str, Any]]:
    if not needs_proxy(plan):
        if proxy_ip is not None:
            raise ValueError("a proxy IP was given for a sandbox whose plan needs no proxy")
        return []
    if proxy_ip is None:
        raise ValueError("the plan needs the egress/credential proxy: render_pod needs its proxy_ip")
    url = f"http://{_url_host(proxy_ip)}:{EGRESS_PORT}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    env = [{"name": name, "value": url} for name in names]
    # Credential proxies are reached directly, as on Docker.
    # NO_PROXY holds the bare address in either family: a bracketed IPv6 entry ([fd00::5]) would
    # match Python's urllib but makes httpx (every provider SDK built on it) refuse to build a
    # client at all (InvalidURL); the bare address matches httpx, requests and curl. urllib,
    # which compares the bracketed host, sends credential-proxy calls of an IPv6 pod to the
    # egress proxy instead (refused there unless the plan allows that address).
    return env + [{"name": name, "value": proxy_ip} for name in ("NO_PROXY", "no_proxy")]


def render_pod(shape: SandboxShape, *, proxy_ip: str | None) -> dict[str, Any]:
    """The sandbox pod: the token init container and the runner.

    Raises:
        EnvError: ``resource_exceeded`` for what a pod cannot ask for ("all" GPUs).
        ValueError: ``proxy_ip`` is missing although the plan needs a proxy (or given when not);
            the placement names a RuntimeClass besides the isolation's.
    """
    secret = object_name(shape.sandbox_id)
    env, mounts, files = _credentials(shape.plan, secret)
    env = [*_base_env(), *env, *_proxy_env(shape.plan, proxy_ip)]
    containers = {"initContainers": [_token_container(shape)], "containers": [_runner(shape, env, mounts)]}
    spec = _pod_spec(shape, runtime_class=shape.sandbox_runtime_class())
    spec.update({**containers, "volumes": _sandbox_volumes(shape, secret, files)})
    no_dns(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _metadata(shape, "sandbox"), "spec": spec}


def _credentials(
    plan: SandboxPlan, secret: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The runner's credentials from the pod's Secret: ``(env, mounts, secret items)``; the
    mounts begin with the workspace, /tmp and the control dir."""
    env: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = [
        {"name": "workspace", "mountPath": WORKSPACE},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "control", "mountPath": CONTROL_DIR},
    ]
    files: list[dict[str, Any]] = []
    for i, c in enumerate(plan.credentials):
        key = f"cred-{i}"
        if c.kind == "env_var":
            assert c.var_name is not None
            env.append({"name": c.var_name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
        elif c.kind == "file":
            assert c.path is not None
            files.append({"key": key, "path": key, "mode": _READ_ONLY})
            mounts.append({"name": "credentials", "mountPath": c.path, "subPath": key, "readOnly": True})
    return env, mounts, files


def _sandbox_volumes(shape: SandboxShape, secret: str, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workspace, /tmp, the control dir, the token and (if any) the credential files."""
    workspace: dict[str, Any] = {"sizeLimit": str(shape.limits.disk_bytes)}
    if shape.settings.workspace_medium == "Memory":
        workspace["medium"] = "Memory"
    token_items = [{"key": "token", "path": "token", "mode": _READ_ONLY}]
    tls_items = [{"key": key, "path": key, "mode": _READ_ONLY} for key in ("tls.crt", "tls.key")]
    volumes: list[dict[str, Any]] = [
        {"name": "workspace", "emptyDir": workspace},
        _memory_dir("tmp", shape.limits.tmp_bytes),
        _memory_dir("control", "1Mi"),
        {"name": "token", "secret": {"secretName": secret, "defaultMode": _READ_ONLY, "items": token_items}},
        {
            "name": "runner-tls",
            "secret": {"secretName": secret, "defaultMode": _READ_ONLY, "items": tls_items},
        },
    ]
    if files:
        credentials = {"secretName": secret, "defaultMode": _READ_ONLY, "items": files}
        volumes.append({"name": "credentials", "secret": credentials})
    return volumes


def _token_container(shape: SandboxShape) -> dict[str, Any]:
    """The init container copying the runner's token into the control dir."""
    return {
        "name": "token",
        "image": shape.image,
        "imagePullPolicy": shape.settings.image_pull_policy,
        "command": [PYTHON, "-c", _COPY_TOKEN],
        "env": _base_env(),
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "50m", "memory": "64Mi"},
        },
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "token", "mountPath": SECRET_DIR, "readOnly": True},
            {"name": "control", "mountPath": CONTROL_DIR},
        ],
    }


def _runner(shape: SandboxShape, env: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The runner container."""
    args = [
        "--listen",
        RUNNER_LISTEN,
        "--token-file",
        TOKEN_FILE,
        "--token-file-delete",
        "--workspace",
        WORKSPACE,
        "--tls-cert",
        f"{RUNNER_TLS_DIR}/tls.crt",
        "--tls-key",
        f"{RUNNER_TLS_DIR}/tls.key",
    ]
    mounts = [*mounts, {"name": "runner-tls", "mountPath": RUNNER_TLS_DIR, "readOnly": True}]
    return {
        "name": "runner",
        "image": shape.image,
        "imagePullPolicy": shape.settings.image_pull_policy,
        "args": [*args, *(arg for address in shape.fence for arg in ("--fence", address))],
        "ports": [{"containerPort": RUNNER_PORT, "name": "grpc", "protocol": "TCP"}],
        "env": env,
        "resources": _resources(shape),
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }


# --- the proxy pod -------------------------------------------------------------------------


def _proxy_ports(plan: SandboxPlan) -> list[int]:
    return [EGRESS_PORT, *credential_ports(plan).values()]


def render_proxy_pod(shape: SandboxShape) -> dict[str, Any]:
    """The proxy pod: ``python -m airlock.proxy bundle`` over the proxy Secret's config."""
    ports = [{"containerPort": EGRESS_PORT, "name": "egress", "protocol": "TCP"}]
    ports += [
        {"containerPort": port, "name": f"cred-{i}", "protocol": "TCP"}
        for i, port in enumerate(credential_ports(shape.plan).values())
    ]
    amounts = {"cpu": shape.settings.proxy.cpu, "memory": shape.settings.proxy.memory}
    proxy = {
        "name": "proxy",
        "image": shape.settings.proxy.image or shape.image,
        "imagePullPolicy": shape.settings.image_pull_policy,
        "command": [PYTHON, "-m", "airlock.proxy"],
        "args": ["bundle", "--config", PROXY_CONFIG],
        "ports": ports,
        "env": _base_env(),
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "config", "mountPath": PROXY_DIR, "readOnly": True},
        ],
    }
    volumes = [
        _memory_dir("tmp", "16Mi"),
        {
            "name": "config",
            "secret": {"secretName": object_name(shape.sandbox_id, "proxy"), "defaultMode": _READ_ONLY},
        },
    ]
    spec = _pod_spec(shape, runtime_class=None)
    spec.update({"containers": [proxy], "volumes": volumes})
    if not shape.plan.egress.resolves_names:
        no_dns(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _metadata(shape, "proxy"), "spec": spec}


# --- secrets -------------------------------------------------------------------------------


def _secret(shape: SandboxShape, role: Role, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(shape, role),
        "type": "Opaque",
        "immutable": True,
        "data": {key: _b64(value) for key, value in data.items()},
    }


def render_secret(
    shape: SandboxShape, token: str, credentials: ResolvedCredentials, certificate: RunnerCertificate
) -> dict[str, Any]:
    """The sandbox's Secret: the runner token, the runner's TLS certificate and key, and the
    env_var/file credentials (never a sidecar's)."""
    data = {
        "token": token,
        "tls.crt": certificate.cert_pem.decode("ascii"),
        "tls.key": certificate.key_pem.decode("ascii"),
    }
    for i, c in enumerate(shape.plan.credentials):
        if c.kind in ("env_var", "file"):
            data[f"cred-{i}"] = credentials.values[c.name]
    return _secret(shape, "sandbox", data)


def render_proxy_secret(shape: SandboxShape, credentials: ResolvedCredentials) -> dict[str, Any]:
    """The proxy's Secret: the bundle config and each sidecar credential's secret file."""
    data = {"config.json": bundle_config(shape).model_dump_json()}
    for name, port in credential_ports(shape.plan).items():
        data[f"secret-{port}"] = credentials.values[name]
    return _secret(shape, "proxy", data)


# --- network policies ----------------------------------------------------------------------


def _tcp(ports: list[int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _network_policy(
    shape: SandboxShape, role: Role, ingress: list[dict[str, Any]], egress: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(shape, role),
        "spec": {
            "podSelector": {"matchLabels": sandbox_selector(shape.sandbox_id, role)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": egress,
        },
    }


def _sandbox_policy(shape: SandboxShape) -> dict[str, Any]:
    sid = shape.sandbox_id
    controller = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: shape.controller_namespace}},
        "podSelector": {"matchLabels": dict(shape.settings.controller_pod_labels)},
    }
    ingress = [{"from": [controller], "ports": _tcp([RUNNER_PORT])}]
    egress: list[dict[str, Any]] = []
    if needs_proxy(shape.plan):
        proxy = {"podSelector": {"matchLabels": sandbox_selector(sid, "proxy")}}
        egress.append({"to": [proxy], "ports": _tcp(_proxy_ports(shape.plan))})
    return _network_policy(shape, "sandbox", ingress, egress)


def _proxy_policy(shape: SandboxShape) -> dict[str, Any]:
    sandbox = {"podSelector": {"matchLabels": sandbox_selector(shape.sandbox_id, "sandbox")}}
    ingress = [{"from": [sandbox], "ports": _tcp(_proxy_ports(shape.plan))}]
    return _network_policy(shape, "proxy", ingress, _proxy_egress(shape))


def _proxy_egress(shape: SandboxShape) -> list[dict[str, Any]]:
    """What the plan allows, as NetworkPolicy egress rules (the proxy enforces the rest)."""
    egress_plan = shape.plan.egress
    rules: list[dict[str, Any]] = []
    if egress_plan.resolves_names:
        rules.append(dns_egress_rule(shape.settings.dns))
    denies = [r for r in egress_plan.rules if r.action == "deny" and r.network is not None]
    for rule in egress_plan.rules:
        if rule.action != "allow" or rule.network is None:
            continue
        ports = [rule.port] if rule.port is not None else []
        if rule.network.prefixlen == 0:  # "every public address" of the family
            peers = _public_blocks(denies, ports, families=(rule.network.version,))
        else:
            peers = _block(rule.network, denies, ports)
        if peers:
            rules.append(_egress_rule(peers, ports))
    rules += [_service_rule(r) for r in egress_plan.rules if r.action == "allow" and r.service is not None]
    names = [r for r in egress_plan.rules if r.action == "allow" and r.kind not in ("cidr", "service")]
    if names or egress_plan.default == "allow":
        if egress_plan.default == "deny" and all(r.port is not None for r in names):
            ports = sorted({r.port for r in names if r.port is not None})
        else:
            ports = []
        peers = _public_blocks(denies, ports, families=(4, 6))
        if peers:
            rules.append(_egress_rule(peers, ports))
    return rules


def _service_rule(rule: EgressRule) -> dict[str, Any]:
    """An in-cluster Service as a selector peer (never an ipBlock) on the pods' port."""
    service = rule.service
    assert service is not None and rule.port is not None
    peer = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: service.namespace}},
        "podSelector": {"matchLabels": dict(service.pods)} if service.pods else {},
    }
    return _egress_rule([peer], [service.target_port or rule.port])


def _egress_rule(peers: list[dict[str, Any]], ports: list[int]) -> dict[str, Any]:
    rule: dict[str, Any] = {"to": peers}
    if ports:
        rule["ports"] = _tcp(ports)
    return rule


def _excludable(deny: EgressRule, ports: list[int]) -> bool:
    """Whether ``deny`` refuses every port a peer admitting ``ports`` ([] = any) is open on."""
    return deny.port is None or ports == [deny.port]


def _block(
    network: IPNetwork, denies: list[EgressRule], ports: list[int], extra: list[IPNetwork] | None = None
) -> list[dict[str, Any]]:
    """``network`` as an ipBlock peer, less ``extra`` and the deny CIDRs strictly inside it
    (none when nothing of it is left)."""
    excluded: list[IPNetwork] = list(extra or [])
    for deny in denies:
        net = deny.network
        if net is None or net.version != network.version or not _excludable(deny, ports):
            continue
        if net_within(net, network):
            excluded.append(net)
    collapsed = _collapse(excluded)
    if network in collapsed:
        return []
    block: dict[str, Any] = {"cidr": str(network)}
    if collapsed:
        block["except"] = [str(n) for n in collapsed]
    return [{"ipBlock": block}]


def _collapse(networks: list[IPNetwork]) -> list[IPNetwork]:
    """``networks`` sorted and without duplicates or entries inside another (neighbours stay
    apart, so each special range keeps its familiar name)."""
    unique = sorted(set(networks), key=lambda n: (n.version, n.network_address, n.prefixlen))
    return [n for n in unique if not any(o != n and net_within(n, o) for o in unique)]


def _public_blocks(
    denies: list[EgressRule], ports: list[int], families: tuple[int, ...]
) -> list[dict[str, Any]]:
    """Every public address of ``families``: the whole space less the special ranges and denies."""
    peers: list[dict[str, Any]] = []
    for version in families:
        everything = ipaddress.ip_network("0.0.0.0/0" if version == 4 else "::/0")
        special = [net for _, net in SPECIAL_RANGES if net.version == version]
        peers += _block(everything, denies, ports, special)
    return peers


def render_network_policies(shape: SandboxShape) -> list[dict[str, Any]]:
    """The sandbox pod's NetworkPolicy, and the proxy pod's when the sandbox has a proxy."""
    policies = [_sandbox_policy(shape)]
    if needs_proxy(shape.plan):
        policies.append(_proxy_policy(shape))
    return policies


def render_default_deny(namespace: str) -> dict[str, Any]:
    """The namespace-wide policy that isolates every pod nothing else admits (in and out)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": DEFAULT_DENY_POLICY,
            "namespace": namespace,
            "labels": {LABEL_MANAGED: MANAGED_BY},
        },
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


# --- shared with other pods of the backend (the enforcement proof) --------------------------


def hardened_pod_spec(shape: SandboxShape, *, runtime_class: str | None) -> dict[str, Any]:
    """The hardened pod spec every pod of the backend starts from (no containers, no volumes)."""
    return _pod_spec(shape, runtime_class=runtime_class)


def hardened_container_security() -> dict[str, Any]:
    """The securityContext of every container of the backend (non-root, read-only, no caps)."""
    return _container_security()

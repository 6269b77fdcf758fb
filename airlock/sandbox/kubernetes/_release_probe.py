"""``airlock doctor --backend kubernetes --probe``: run a Helm release's test hooks again.

The chart's ``helm test`` is the isolation probe (a pod that runs jobs under a deny-all and
an allow-list agent and fails on any hole). This runs exactly that, with the operator's
kubeconfig and no helm binary: the hooks come from the release as Helm stored it (the
``sh.helm.release.v1.<name>.v<N>`` Secret: base64, gzip, JSON), are recreated in weight order
(an existing one is deleted first, as ``before-hook-creation`` does), and the test pod's
outcome and log are the checks. The objects stay afterwards, as helm leaves them.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import time
from typing import Any

import yaml
from pydantic import BaseModel

from .._declaration import DoctorCheck
from ._access import ANY_NAMESPACE, RELEASE_TEST_ACCESS
from ._api import ApiFailure, KubeApi, configured
from ._settings import KubernetesSettings

__all__ = ["probe_release", "release_hooks"]

#: How each kind a test hook may be is created and deleted (KubeApi attribute, verb suffix).
_KINDS: dict[str, tuple[str, str]] = {
    "Pod": ("core", "namespaced_pod"),
    "Service": ("core", "namespaced_service"),
    "ServiceAccount": ("core", "namespaced_service_account"),
    "ConfigMap": ("core", "namespaced_config_map"),
    "Secret": ("core", "namespaced_secret"),
    "Role": ("rbac", "namespaced_role"),
    "RoleBinding": ("rbac", "namespaced_role_binding"),
    "ClusterRoleBinding": ("rbac", "cluster_role_binding"),
}
#: Hook kinds without a namespace.
_CLUSTER_SCOPED = frozenset({"ClusterRoleBinding"})
_LOG_LINES = 40


def release_hooks(release: dict[str, Any], event: str = "test") -> list[dict[str, Any]]:
    """The release's hook objects for ``event``, in the order helm runs them (weight, then name)."""
    hooks = [h for h in release.get("hooks") or [] if event in (h.get("events") or [])]
    hooks.sort(key=lambda h: (int(h.get("weight") or 0), str(h.get("name") or "")))
    return [obj for h in hooks for obj in yaml.safe_load_all(h.get("manifest") or "") if obj]


def decode_release(secret: dict[str, Any]) -> dict[str, Any]:
    """A Helm release from its storage Secret (``data.release``: base64 of base64 of gzip JSON)."""
    stored = base64.b64decode(base64.b64decode(secret["data"]["release"]))
    if stored[:2] == b"\x1f\x8b":
        stored = gzip.decompress(stored)
    release: dict[str, Any] = json.loads(stored)
    return release


async def probe_release(
    settings: BaseModel | None, release: str, *, wait_s: float = 900.0
) -> list[DoctorCheck]:
    """Run ``release``'s (``[namespace/]name``, default namespace ``airlock``) test hooks and
    report the test pod's verdict: ok when it succeeds, an error with its log when not."""
    namespace, _, name = release.rpartition("/")
    namespace = namespace or "airlock"
    what = f"isolation probe ({namespace}/{name})"
    if not configured(settings):
        return [DoctorCheck(what, "error", "no cluster configured", "set KUBECONFIG or backends.kubernetes")]
    chosen = settings if isinstance(settings, KubernetesSettings) else KubernetesSettings()
    api = await KubeApi.connect(chosen, RELEASE_TEST_ACCESS, namespace=ANY_NAMESPACE)
    try:
        return await _probe(api, namespace, name, what, wait_s)
    except ApiFailure as e:
        return [
            DoctorCheck(
                what, "error", f"the API refused: {e}", "check the kubeconfig's access to that namespace"
            )
        ]
    finally:
        api.close()


async def _probe(api: KubeApi, namespace: str, name: str, what: str, wait_s: float) -> list[DoctorCheck]:
    stored = await api.call(
        api.core.list_namespaced_secret, namespace, label_selector=f"owner=helm,name={name}"
    )
    versions = [
        s
        for s in stored.get("items") or []
        if (s["metadata"].get("labels") or {}).get("status") == "deployed"
    ]
    if not versions:
        hint = "install the chart (helm install) or name the release: --release NAMESPACE/NAME"
        return [
            DoctorCheck(what, "error", f"no deployed Helm release {name!r} in namespace {namespace}", hint)
        ]
    latest = max(versions, key=lambda s: int(s["metadata"]["labels"].get("version") or 0))
    hooks = release_hooks(decode_release(latest))
    pods = [o for o in hooks if o.get("kind") == "Pod"]
    if not pods:
        return [
            DoctorCheck(
                what, "error", "the release has no test pod", "install it with isolationTest.enabled=true"
            )
        ]
    for obj in hooks:
        await _recreate(api, obj, namespace)
    results = [await _outcome(api, namespace, pod["metadata"]["name"], what, wait_s) for pod in pods]
    return results


async def _recreate(api: KubeApi, obj: dict[str, Any], default_namespace: str) -> None:
    kind = str(obj.get("kind"))
    if kind not in _KINDS:
        raise ApiFailure(0, "Unsupported", f"a test hook of kind {kind} (only {', '.join(_KINDS)})")
    group, suffix = _KINDS[kind]
    client = getattr(api, group)
    namespace = obj["metadata"].get("namespace") or default_namespace
    name = obj["metadata"]["name"]
    where = () if kind in _CLUSTER_SCOPED else (namespace,)
    try:
        await api.call(getattr(client, f"delete_{suffix}"), name, *where)
    except ApiFailure as e:
        if e.status != 404:
            raise
    if kind == "Pod":  # a pod's name is free only once it is really gone
        await _gone(api, name, namespace)
    await api.call(getattr(client, f"create_{suffix}"), *where, obj)


async def _gone(api: KubeApi, pod: str, namespace: str, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            await api.call(api.core.read_namespaced_pod, pod, namespace)
        except ApiFailure as e:
            if e.status == 404:
                return
            raise
        await asyncio.sleep(0.5)


async def _outcome(api: KubeApi, namespace: str, pod: str, what: str, wait_s: float) -> DoctorCheck:
    deadline = time.monotonic() + wait_s
    phase = "Pending"
    while time.monotonic() < deadline:
        status = (await api.call(api.core.read_namespaced_pod, pod, namespace)).get("status") or {}
        phase = str(status.get("phase") or "Pending")
        if phase in ("Succeeded", "Failed"):
            break
        await asyncio.sleep(1.0)
    else:
        return DoctorCheck(what, "error", f"test pod {pod} still {phase} after {wait_s:.0f} s",
                           f"kubectl -n {namespace} describe pod {pod}")  # fmt: skip
    log = await api.call(api.core.read_namespaced_pod_log, pod, namespace)
    text = str(log.get("text") or "") if isinstance(log, dict) else str(log)
    tail = "\n".join(text.rstrip().splitlines()[-_LOG_LINES:])
    if phase == "Succeeded":
        return DoctorCheck(what, "ok", f"test pod {pod} passed: isolation holds\n{tail}")
    return DoctorCheck(
        what,
        "error",
        f"test pod {pod} failed:\n{tail}",
        "a reachable destination means the CNI does not enforce NetworkPolicy (or a policy is missing); "
        f"the full log: kubectl -n {namespace} logs {pod}",
    )

"""``airlock doctor``'s questions to the Kubernetes backend.

API reachable (and its version); the namespace exists; RBAC allows every permission of the
access tables the backend and doctor are limited to, for the configured connection mode (one
SelfSubjectAccessReview each, see ``_access.py``); the RuntimeClasses for gvisor and micro_vm exist;
the image can be pulled, as far as the API can tell (its pull Secrets exist); the namespace
has a default-deny NetworkPolicy; the proxy pods' DNS peers reach the cluster's resolver
(kube-dns, NodeLocal DNSCache, OpenShift DNS); a default StorageClass exists for the chart's
job-store claim. A machine with no cluster configured at all gets one line
saying so, not a failure.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from airlock.images import image_registry, runner_image_tag
from layer0 import EnvError

from .._declaration import DoctorCheck
from ._access import (
    DNS_DISCOVERY_ACCESS,
    DOCTOR_ACCESS,
    SANDBOX_ACCESS,
    STORAGE_DISCOVERY_ACCESS,
    Grant,
    resolve,
)
from ._api import ApiFailure, KubeApi, configured, connect_mode
from ._dns import ClusterResolver, dns_findings, node_local_addresses
from ._enforcement_doctor import enforcement_check
from ._names import DEFAULT_DENY_POLICY
from ._settings import KubernetesSettings
from ._storage import storage_check

__all__ = ["doctor_checks"]


async def doctor_checks(settings: BaseModel | None = None) -> list[DoctorCheck]:
    """The checks, in order; the later ones only when the API answers. Without a
    ``backends.kubernetes`` section a problem is a warning: nothing asked for this cluster."""
    checks = await _checks(settings)
    if settings is None:
        checks = [replace(c, status="warning") if c.status == "error" else c for c in checks]
    return checks


async def _checks(settings: BaseModel | None) -> list[DoctorCheck]:
    if not configured(settings):
        return [
            DoctorCheck(
                "kubernetes",
                "ok",
                "not configured (no backends.kubernetes, no kubeconfig, not in a cluster); not checked",
            )
        ]
    chosen = settings if isinstance(settings, KubernetesSettings) else KubernetesSettings()
    try:
        api = await KubeApi.connect(
            chosen, SANDBOX_ACCESS + DOCTOR_ACCESS + DNS_DISCOVERY_ACCESS + STORAGE_DISCOVERY_ACCESS
        )
    except EnvError as e:
        return [
            DoctorCheck("kubernetes api", "error", str(e), "check the kubeconfig, its context, or in_cluster")
        ]
    try:
        try:
            version = await api.call(api.version.get_code)
        except ApiFailure as e:
            return [
                DoctorCheck(
                    "kubernetes api",
                    "error",
                    f"{api.api_client.configuration.host} does not answer: {e}",
                    "check the kubeconfig's server and credentials",
                )
            ]
        checks = [
            DoctorCheck(
                "kubernetes api",
                "ok",
                f"{api.api_client.configuration.host} answers ({version.get('gitVersion')})",
            )
        ]
        namespace = await _namespace(api, chosen.namespace)
        checks.append(namespace)
        if namespace.status == "error":
            return checks
        checks.append(await _rbac(api, chosen))
        checks += await _runtime_classes(api, chosen)
        checks.append(await _image(api, chosen))
        checks.append(await _default_deny(api, chosen.namespace))
        checks.append(await enforcement_check(api, chosen))
        checks.append(await _dns_resolver(api, chosen))
        checks.append(await storage_check(api))
        return checks
    finally:
        api.close()


async def _namespace(api: KubeApi, name: str) -> DoctorCheck:
    try:
        await api.call(api.core.read_namespace, name)
    except ApiFailure as e:
        if e.status == 404:
            return DoctorCheck(
                "kubernetes namespace",
                "error",
                f"namespace {name!r} does not exist",
                f"create it (kubectl create namespace {name}) or set backends.kubernetes.namespace",
            )
        if e.status != 403:  # reading namespaces is not required; the RBAC check says what is
            return DoctorCheck("kubernetes namespace", "error", f"cannot read namespace {name!r}: {e}")
    return DoctorCheck("kubernetes namespace", "ok", f"namespace {name!r} exists")


async def _rbac(api: KubeApi, settings: KubernetesSettings) -> DoctorCheck:
    """One SelfSubjectAccessReview per permission of the access tables (and per resource
    name), for the settings' connection mode; what every identity has by default is skipped."""
    required = resolve(SANDBOX_ACCESS + DOCTOR_ACCESS, settings, connect_mode(settings)).grants
    reviews = [
        (grant, name)
        for grant in required  # DNS discovery is optional: what it cannot read is a warning
        if grant.default_role is None
        for name in (grant.names or (None,))
    ]
    results = await asyncio.gather(*(_review(api, grant, name) for grant, name in reviews))
    denied = [label for label, ok in results if not ok]
    mode = connect_mode(settings)
    if denied:
        return DoctorCheck(
            "kubernetes rbac",
            "error",
            f"not allowed (namespace {settings.namespace!r}, connect {mode}): {', '.join(denied)}",
            "grant them to this identity (the Helm chart's Role and ClusterRole have exactly these)",
        )
    return DoctorCheck(
        "kubernetes rbac",
        "ok",
        f"all {len(reviews)} permissions the backend and doctor use (connect {mode}) are allowed",
    )


async def _review(api: KubeApi, grant: Grant, name: str | None) -> tuple[str, bool]:
    """(label, allowed) for ``grant`` on object ``name`` (None: any)."""
    resource, _, sub = grant.resource.partition("/")
    attrs: dict[str, Any] = {"verb": grant.verb, "group": grant.group, "resource": resource}
    if sub:
        attrs["subresource"] = sub
    if grant.namespace is not None:
        attrs["namespace"] = grant.namespace
    if name is not None:
        attrs["name"] = name
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }
    label = f"{grant.verb} {grant.resource}" + (f".{grant.group}" if grant.group else "")
    label += f" {name!r}" if name is not None else ""
    try:
        review = await api.call(api.authorization.create_self_subject_access_review, body)
    except ApiFailure:
        return label, False
    return label, bool((review.get("status") or {}).get("allowed"))


async def _runtime_classes(api: KubeApi, settings: KubernetesSettings) -> list[DoctorCheck]:
    checks = []
    for kind, name in (
        ("gvisor", settings.runtime_classes.gvisor),
        ("micro_vm", settings.runtime_classes.micro_vm),
    ):
        try:
            found = await api.call(api.node.read_runtime_class, name)
        except ApiFailure as e:
            message = (
                f"RuntimeClass {name!r} is not in the cluster: agents asking for {kind} isolation are "
                "refused (never downgraded)"
                if e.status == 404
                else f"cannot read RuntimeClass {name!r}: {e}"
            )
            checks.append(
                DoctorCheck(
                    f"kubernetes {kind}", "warning", message, "install it, or name yours in runtime_classes"
                )
            )
            continue
        checks.append(
            DoctorCheck(
                f"kubernetes {kind}", "ok", f"RuntimeClass {name!r} (handler {found.get('handler')!r})"
            )
        )
    return checks


async def _image(api: KubeApi, settings: KubernetesSettings) -> DoctorCheck:
    """The runner image: its pull Secrets exist, and it names a registry unless the operator
    said it is preloaded on the nodes (``image_pull_policy: Never``)."""
    image = settings.image or runner_image_tag()
    # Copied from pull_secrets_from at start: they must be there (the copy may not exist yet).
    where = settings.pull_secrets_from or settings.namespace
    missing = []
    for secret in settings.image_pull_secrets:
        try:
            await api.call(api.core.read_namespaced_secret, secret, where)
        except ApiFailure as e:
            missing.append(f"{secret} ({e.reason})")
    if missing:
        return DoctorCheck(
            "kubernetes image",
            "error",
            f"image pull Secrets missing in {where!r}: {', '.join(missing)}",
            "create them, or remove them from image_pull_secrets",
        )
    preloaded = settings.image_pull_policy == "Never"
    if image_registry(image) is None and not preloaded:
        return DoctorCheck(
            "kubernetes image",
            "error",
            f"{image} names no registry: nodes would look for it on Docker Hub (ImagePullBackOff)",
            "push the images (airlock images push REGISTRY) and set backends.kubernetes.image to the "
            "printed REGISTRY/airlock-runner@sha256:...; or, with the image loaded on every node "
            "(kind load, k3s ctr images import), set image_pull_policy: Never",
        )
    how = "preloaded on the nodes (image_pull_policy: Never)" if preloaded else "pulled"
    pinned = "pinned by digest" if "@" in image else "by tag (a digest reference pins it)"
    return DoctorCheck(
        "kubernetes image",
        "ok",
        f"{image}, {pinned}, {how} (pull Secrets present: "
        f"{', '.join(settings.image_pull_secrets) or 'none'}; "
        "the API cannot tell whether nodes have it: a first run reports ImagePullBackOff if not)",
    )


async def _default_deny(api: KubeApi, namespace: str) -> DoctorCheck:
    try:
        found = await api.call(api.networking.list_namespaced_network_policy, namespace)
    except ApiFailure as e:
        return DoctorCheck("kubernetes default-deny", "error", f"cannot list NetworkPolicies: {e}")
    for policy in found.get("items") or []:
        spec = policy.get("spec") or {}
        if (
            not (spec.get("podSelector") or {})
            and set(spec.get("policyTypes") or []) >= {"Ingress", "Egress"}
            and not spec.get("ingress")
            and not spec.get("egress")
        ):
            return DoctorCheck(
                "kubernetes default-deny",
                "ok",
                f"NetworkPolicy {policy['metadata']['name']!r} denies all traffic in {namespace!r} by "
                "default (enforced only if the cluster's CNI enforces NetworkPolicy)",
            )
    return DoctorCheck(
        "kubernetes default-deny",
        "warning",
        f"no default-deny NetworkPolicy in {namespace!r}",
        f"the backend creates {DEFAULT_DENY_POLICY} on its first run (or install the Helm chart)",
    )


async def _dns_resolver(api: KubeApi, settings: KubernetesSettings) -> DoctorCheck:
    """The cluster's resolver (kube-dns Service, ``node-local-dns`` DaemonSet, OpenShift's
    ``openshift-dns``) against ``settings.dns``: which peers a proxy pod's policy lacks."""
    from kubernetes import client

    unreadable: list[str] = []

    async def read(what: str, fn: Any, *args: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await api.call(fn, *args)
        except ApiFailure as e:
            if e.status != 404:
                unreadable.append(f"{what}: {e.status} {e.reason}")
            return None
        return found

    service = await read(
        "service kube-system/kube-dns", api.core.read_namespaced_service, "kube-dns", "kube-system"
    )
    spec = (service or {}).get("spec") or {}
    cluster_ip = spec.get("clusterIP") if spec.get("clusterIP") not in (None, "", "None") else None
    apps = client.AppsV1Api(api.api_client)
    node_local = await read(
        "daemonset kube-system/node-local-dns",
        apps.read_namespaced_daemon_set,
        "node-local-dns",
        "kube-system",
    )
    openshift = await read("namespace openshift-dns", api.core.read_namespace, "openshift-dns")
    resolver = ClusterResolver(
        kube_dns_ip=cluster_ip,
        kube_dns_selector=dict(spec.get("selector") or {}),
        node_local=node_local_addresses(node_local, cluster_ip) if node_local is not None else (),
        openshift=openshift is not None,
        unreadable=tuple(unreadable),
    )
    return dns_findings(resolver, settings.dns)

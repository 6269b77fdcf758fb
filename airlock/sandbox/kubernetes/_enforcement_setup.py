"""A namespace's :class:`~._guard.EnforcementGuard` wired to the cluster: what the prober tries,
under which owner, and where each result is published."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from urllib.parse import urlsplit

from airlock.proxy import host_port_text

from ._api import ApiFailure, KubeApi, in_cluster
from ._enforcement import EnforcementProof
from ._enforcement_pods import ProofTarget
from ._enforcement_result import ANNOTATION, EnforcementResult
from ._guard import EnforcementGuard
from ._own_address import own_pod_address
from ._owner import OwnerLease
from ._settings import KubernetesSettings

__all__ = ["make_guard", "proof_targets", "read_published"]

_log = logging.getLogger("airlock.sandbox.kubernetes")


async def proof_targets(api: KubeApi, settings: KubernetesSettings) -> list[ProofTarget]:
    """What a deny-all sandbox must never reach besides the canary: the cloud metadata
    service, the API server and the controller (each where the settings say, else where this
    process finds it; a target that has no address here is left out)."""
    enforcement = settings.enforcement
    targets = [ProofTarget("cloud metadata", enforcement.metadata_address)]
    api_server = enforcement.api_server_address or _api_server(api)
    if api_server is not None:
        targets.append(ProofTarget("api server", api_server))
    controller = enforcement.controller_address
    if controller is None and in_cluster():
        ip = await asyncio.to_thread(own_pod_address)
        if ip is not None:
            controller = host_port_text(ip, enforcement.controller_port)
    if controller is not None:
        targets.append(ProofTarget("controller", controller))
    return targets


def _api_server(api: KubeApi) -> str | None:
    """The API server as a pod reaches it: the in-cluster service's address, else the client's
    server when it is an IP address (a name would need DNS, which a sandbox has not)."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if host and port and in_cluster():
        return host_port_text(host, int(port))
    url = urlsplit(str(api.api_client.configuration.host))
    if url.hostname is None:
        return None
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in url.hostname else socket.AF_INET, url.hostname)
    except OSError:
        return None
    return host_port_text(url.hostname, url.port or (443 if url.scheme == "https" else 80))


def make_guard(
    api: KubeApi, settings: KubernetesSettings, image: str, controller_namespace: str, lease: OwnerLease
) -> EnforcementGuard:
    """The guard of ``settings.namespace``: proofs made with ``api`` under ``lease``, published
    as the namespace's annotation."""
    proof = EnforcementProof(api, settings, image, controller_namespace)

    async def prove() -> EnforcementResult:
        targets = await proof_targets(api, settings)
        try:
            owner = await lease.acquire()
        except ApiFailure as e:
            from datetime import UTC, datetime

            return EnforcementResult(
                status="unproven",
                namespace=settings.namespace,
                checked_at=datetime.now(UTC),
                reason=f"cannot acquire the owner Lease for the proof's pods: {e}",
            )
        try:
            return await proof.run(owner, targets)
        finally:
            await lease.release()

    async def publish(result: EnforcementResult) -> None:
        patch = {"metadata": {"annotations": {ANNOTATION: result.annotation()}}}
        try:
            await api.call(api.core.patch_namespace, settings.namespace, patch)
        except ApiFailure as e:
            _log.warning(
                "cannot annotate namespace %s with the enforcement result: %s", settings.namespace, e
            )

    mode = settings.network_policy
    return EnforcementGuard(
        namespace=settings.namespace,
        mode=mode,
        interval_s=settings.enforcement.interval_s,
        prove=prove,
        publish=publish if mode == "verify" else None,
    )


def read_published(namespace: dict[str, object]) -> EnforcementResult | None:
    """The result a Namespace object's annotation holds (None: none, or unreadable)."""
    metadata = namespace.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    text = annotations.get(ANNOTATION) if isinstance(annotations, dict) else None
    return EnforcementResult.from_annotation(text) if isinstance(text, str) else None

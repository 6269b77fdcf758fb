"""Image pull Secrets copied into the sandbox namespace (``pull_secrets_from``).

A sandbox namespace the Helm chart creates starts empty, while the registry's pull Secret
lives in the release namespace. At start the controller copies each of ``image_pull_secrets``
from ``pull_secrets_from`` into its sandbox namespace through the API (no ``lookup`` at render
time, so it works under ``helm template`` and GitOps too): created when absent, replaced when
a copy it made earlier differs (a rotated registry password), and never touching a Secret of
the same name that it did not make. Only ``type``, ``data`` and the name are copied; the
values are never logged.

Access it needs: ``get`` on those Secrets in ``pull_secrets_from``; ``get``, ``create`` and
``update`` on Secrets in the sandbox namespace.
"""

from __future__ import annotations

import logging
from typing import Any

from layer0 import EnvError

from ._api import ApiFailure, KubeApi
from ._names import LABEL_MANAGED, MANAGED_BY
from ._settings import KubernetesSettings

__all__ = ["ANNOTATION_COPIED_FROM", "copy_pull_secrets"]

#: On a copy: the ``namespace/name`` it was copied from.
ANNOTATION_COPIED_FROM = "airlock.dev/copied-from"

_log = logging.getLogger("airlock.sandbox.kubernetes")


async def copy_pull_secrets(api: KubeApi, settings: KubernetesSettings) -> list[str]:
    """Copy ``settings.image_pull_secrets`` from ``settings.pull_secrets_from`` into
    ``settings.namespace``; the names created or updated (none when nothing is to copy).

    Raises:
        EnvError: ``provision_failed`` naming the Secret when it is missing where it should be
            copied from, or the API refuses a read or write.
    """
    source = settings.pull_secrets_from
    if source is None or source == settings.namespace:
        return []
    changed = []
    for name in settings.image_pull_secrets:
        original = await _read(api, name, source)
        if original is None:
            raise EnvError.provision_failed(
                f"image pull Secret {name!r} does not exist in {source!r}, where pull_secrets_from "
                "says to copy it from: create it there, or remove it from image_pull_secrets"
            )
        if await _write(api, _copy(original, source, settings.namespace), settings.namespace):
            changed.append(name)
    if changed:
        _log.info("copied image pull Secrets %s from %s into %s", changed, source, settings.namespace)
    return changed


def _copy(original: dict[str, Any], source: str, namespace: str) -> dict[str, Any]:
    name = original["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_MANAGED: MANAGED_BY},
            "annotations": {ANNOTATION_COPIED_FROM: f"{source}/{name}"},
        },
        "type": original.get("type", "Opaque"),
        "data": original.get("data") or {},
    }


async def _read(api: KubeApi, name: str, namespace: str) -> dict[str, Any] | None:
    """The Secret, None when there is none."""
    try:
        found: dict[str, Any] = await api.call(api.core.read_namespaced_secret, name, namespace)
    except ApiFailure as e:
        if e.status == 404:
            return None
        raise EnvError.provision_failed(f"cannot read image pull Secret {namespace}/{name}: {e}") from e
    return found


async def _write(api: KubeApi, copy: dict[str, Any], namespace: str) -> bool:
    """Create or refresh the copy; False when it is current or not ours to change."""
    name = copy["metadata"]["name"]
    existing = await _read(api, name, namespace)
    try:
        if existing is None:
            await api.call(api.core.create_namespaced_secret, namespace, copy)
            return True
        annotations = existing.get("metadata", {}).get("annotations") or {}
        if ANNOTATION_COPIED_FROM not in annotations:
            _log.warning("image pull Secret %s/%s exists and is not a copy: left as it is", namespace, name)
            return False
        if existing.get("data") == copy["data"] and existing.get("type") == copy["type"]:
            return False
        copy["metadata"]["resourceVersion"] = existing["metadata"].get("resourceVersion")
        await api.call(api.core.replace_namespaced_secret, name, namespace, copy)
        return True
    except ApiFailure as e:
        raise EnvError.provision_failed(f"cannot write image pull Secret {namespace}/{name}: {e}") from e

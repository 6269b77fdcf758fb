"""The stand-in API server's storage: objects, resourceVersions, and the garbage collector's cascade.

What a write does here is what the real server's registry does for the same request: fill
``uid``, ``resourceVersion`` (one global counter), ``creationTimestamp``, ``generation`` and
``namespace``; refuse a second object of the same name (409 AlreadyExists), a stale
``resourceVersion`` (409 Conflict), a missing namespace (404), an invalid name or object
(422 Invalid). Kind-specific writes: a Secret's ``stringData`` is folded into ``data``; a
Namespace gets its ``kubernetes.io/metadata.name`` label and ``Active`` phase; a Pod's and a
Namespace's ``status`` is theirs, not the writer's.

Deleting an object deletes, at once and recursively, every object left with no live owner
among its ``ownerReferences`` (the garbage collector's background cascade; ``Orphan`` strips
the references instead); deleting a Namespace deletes everything in it at once. The real
collector also deletes, later, objects created with references to owners that never existed;
this one acts only when an owner is deleted.
"""

from __future__ import annotations

import base64
import copy
import secrets
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ._kube_patch import apply_patch
from ._kube_resources import RESOURCES, ApiError, Resource, name_errors, resource_named

__all__ = ["ObjectStore", "now"]

#: Checks an object about to be stored; raises :class:`ApiError` (422) when it is invalid.
Validator = Callable[[Resource, dict[str, Any]], None]

_NAMESPACES = RESOURCES[("v1", "namespaces")]
_SYSTEM_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation")


def now() -> str:
    """The current time as the API writes a ``Time`` (RFC 3339, seconds, ``Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """Every stored object, keyed by resource, namespace and name; thread-safe."""

    def __init__(self, validate: Validator | None = None) -> None:
        self.validate = validate
        self.lock = threading.RLock()
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._version = 0

    @property
    def resource_version(self) -> str:
        """The current (last written) resourceVersion."""
        with self.lock:
            return str(self._version)

    def _bump(self) -> str:
        self._version += 1
        return str(self._version)

    # -- reads -----------------------------------------------------------------------

    def find(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the object, or None."""
        with self.lock:
            found = self._objects.get(_key(resource, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        """A copy of the object.

        Raises:
            ApiError: 404 NotFound.
        """
        found = self.find(resource, namespace, name)
        if found is None:
            raise ApiError.not_found(resource, name)
        return found

    def objects(self, resource: Resource, namespace: str | None) -> list[dict[str, Any]]:
        """Copies of the objects of ``resource`` (in ``namespace``, or everywhere), by namespace and name."""
        with self.lock:
            found = [
                copy.deepcopy(obj)
                for (plural, ns, _), obj in sorted(self._objects.items())
                if plural == resource.plural and (namespace is None or ns == namespace)
            ]
        return found

    def namespace_exists(self, name: str) -> bool:
        with self.lock:
            return ("namespaces", "", name) in self._objects

    # -- writes ----------------------------------------------------------------------

    def create(
        self, resource: Resource, namespace: str | None, body: dict[str, Any], *, validate: bool = True
    ) -> dict[str, Any]:
        """Store a new object from ``body``; a copy of it as stored.

        Raises:
            ApiError: 400 (a body of another kind or namespace), 404 (no such namespace),
                422 (invalid), 409 AlreadyExists.
        """
        obj = _typed(resource, body)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{secrets.token_hex(3)[:5]}"
        name = str(meta.get("name") or "")
        _place(resource, namespace, meta)
        with self.lock:
            if resource.namespaced and not self.namespace_exists(str(namespace)):
                raise ApiError.not_found(_NAMESPACES, str(namespace))
            _prepare(resource, obj, None)
            if validate:
                self._check(resource, obj)
            key = _key(resource, namespace, name)
            if key in self._objects:
                raise ApiError.already_exists(resource, name)
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
                meta.pop(field, None)
            meta.update(
                uid=str(uuid.uuid4()), resourceVersion=self._bump(), creationTimestamp=now(), generation=1
            )
            self._objects[key] = obj
            return copy.deepcopy(obj)

    def replace(
        self, resource: Resource, namespace: str | None, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Replace the object with ``body`` (PUT); a copy as stored.

        Raises:
            ApiError: 404, 400 (another name or kind), 409 Conflict (a stale resourceVersion), 422.
        """
        with self.lock:
            current = self.get(resource, namespace, name)
            return self._write(resource, namespace, name, _typed(resource, body), current)

    def patch(
        self, resource: Resource, namespace: str | None, name: str, content_type: str, body: bytes
    ) -> dict[str, Any]:
        """Apply a PATCH body to the object; a copy as stored.

        Raises:
            ApiError: 404, 415, 400, 409 Conflict (the patch names a stale resourceVersion), 422.
        """
        with self.lock:
            current = self.get(resource, namespace, name)
            patched = apply_patch(current, content_type, body)
            return self._write(resource, namespace, name, _typed(resource, patched), current)

    def _write(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        obj: dict[str, Any],
        current: dict[str, Any],
    ) -> dict[str, Any]:
        meta, old = obj["metadata"], current["metadata"]
        if meta.get("name", name) != name:
            raise ApiError.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        _place(resource, namespace, meta)
        wanted = meta.get("resourceVersion")
        if wanted and str(wanted) != old["resourceVersion"]:
            raise ApiError.conflict(resource, name)
        _prepare(resource, obj, current)
        for field in _SYSTEM_FIELDS:
            meta[field] = old[field]
        if _spec_of(obj) != _spec_of(current):
            meta["generation"] = int(old.get("generation") or 1) + 1
        self._check(resource, obj)
        meta["resourceVersion"] = self._bump()
        self._objects[_key(resource, namespace, name)] = obj
        return copy.deepcopy(obj)

    def _check(self, resource: Resource, obj: dict[str, Any]) -> None:
        name = str(obj["metadata"].get("name") or "")
        causes = name_errors(resource, name)
        if causes:
            raise ApiError.invalid(resource, name, causes)
        if self.validate is not None:
            self.validate(resource, obj)

    def mark_deleted(
        self, resource: Resource, namespace: str | None, name: str, grace: int
    ) -> dict[str, Any]:
        """Mark the object as being deleted (``deletionTimestamp``, ``deletionGracePeriodSeconds``)
        without removing it: a pod's graceful termination; a copy as stored.

        Raises:
            ApiError: 404 NotFound.
        """
        with self.lock:
            key = _key(resource, namespace, name)
            if key not in self._objects:
                raise ApiError.not_found(resource, name)
            meta = self._objects[key]["metadata"]
            meta.setdefault("deletionTimestamp", now())
            meta["deletionGracePeriodSeconds"] = grace
            meta["resourceVersion"] = self._bump()
            return copy.deepcopy(self._objects[key])

    def delete(
        self, resource: Resource, namespace: str | None, name: str, *, propagation: str | None = None
    ) -> list[tuple[Resource, dict[str, Any]]]:
        """Delete the object and what the cascade takes with it; (resource, object) each, the target first.

        Raises:
            ApiError: 404 NotFound.
        """
        with self.lock:
            key = _key(resource, namespace, name)
            if key not in self._objects:
                raise ApiError.not_found(resource, name)
            target = self._objects.pop(key)
            removed = [(resource, target)]
            if resource.plural == "namespaces":
                for k in [k for k in self._objects if k[1] == name]:
                    removed.append((resource_named(k[0]), self._objects.pop(k)))
            if propagation == "Orphan":
                self._orphan(str(target["metadata"]["uid"]))
            removed += self._collect(removed)
            self._bump()
            return [(kind, copy.deepcopy(obj)) for kind, obj in removed]

    def _orphan(self, uid: str) -> None:
        for obj in self._objects.values():
            refs = obj["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") != uid]
            if len(kept) != len(refs):
                if kept:
                    obj["metadata"]["ownerReferences"] = kept
                else:
                    del obj["metadata"]["ownerReferences"]
                obj["metadata"]["resourceVersion"] = self._bump()

    def _collect(
        self, removed: list[tuple[Resource, dict[str, Any]]]
    ) -> list[tuple[Resource, dict[str, Any]]]:
        """Remove, until none is left, every object that named one of the ``removed`` as its owner
        and has no live owner left."""
        gone = {str(obj["metadata"]["uid"]) for _, obj in removed}
        collected: list[tuple[Resource, dict[str, Any]]] = []
        while True:
            live = {(str(obj["metadata"]["uid"]), ns) for (_, ns, _), obj in self._objects.items()}
            orphans = [
                key
                for key, obj in self._objects.items()
                if (refs := obj["metadata"].get("ownerReferences") or [])
                and any(r.get("uid") in gone for r in refs)
                and not any((r.get("uid"), key[1]) in live or (r.get("uid"), "") in live for r in refs)
            ]
            if not orphans:
                return collected
            for key in orphans:
                obj = self._objects.pop(key)
                gone.add(str(obj["metadata"]["uid"]))
                collected.append((resource_named(key[0]), obj))


def _key(resource: Resource, namespace: str | None, name: str) -> tuple[str, str, str]:
    return resource.plural, (namespace or "") if resource.namespaced else "", name


def _typed(resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``body`` with its kind and apiVersion (defaulted from the URL; another is a 400)."""
    if not isinstance(body, dict):
        raise ApiError.bad_request(f"the body of a {resource.kind} request must be a JSON object")
    obj = copy.deepcopy(body)
    kind, version = obj.setdefault("kind", resource.kind), obj.setdefault("apiVersion", resource.api_version)
    if (kind, version) != (resource.kind, resource.api_version):
        raise ApiError.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {resource.kind}: '
            f"the object is not a {resource.api_version} {resource.kind}"
        )
    if not isinstance(obj.setdefault("metadata", {}), dict):
        raise ApiError.bad_request("metadata must be an object")
    return obj


def _place(resource: Resource, namespace: str | None, meta: dict[str, Any]) -> None:
    """Set ``meta.namespace`` from the URL (a body naming another one is a 400)."""
    if not resource.namespaced:
        meta.pop("namespace", None)
        return
    if meta.get("namespace") not in (None, "", namespace):
        raise ApiError.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    """What ``generation`` tracks: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _prepare(resource: Resource, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
    """Kind-specific normalization of a write (``current``: the stored object on update)."""
    if resource.status_subresource:
        obj.pop("status", None)
        if current is not None and "status" in current:
            obj["status"] = current["status"]
    if resource.plural == "secrets":
        string_data = obj.pop("stringData", None) or {}
        if isinstance(string_data, dict):
            data = obj.setdefault("data", {}) or {}
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
            obj["data"] = data
        obj.setdefault("type", "Opaque")
    elif resource.plural == "namespaces":
        name = obj["metadata"].get("name")
        if name:
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        if current is None:
            obj["status"] = {"phase": "Active"}

"""The stand-in API server's resources and its errors, in the real server's wire shapes.

:data:`RESOURCES` lists what :class:`~airlock.testing.KubeApiStandIn` serves (group, version,
plural, kind, scope). :class:`ApiError` carries a ``Status`` object as the real server writes
it (``kind: Status``, ``reason``, ``details {name, group, kind}``, ``code``), and the helpers
build the messages the real server sends for each reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["RESOURCES", "ApiError", "Resource", "name_errors", "resource_named"]


@dataclass(frozen=True)
class Resource:
    """One REST resource: where it lives and what it holds."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    #: Names are DNS-1123 labels (namespaces) rather than subdomains.
    label_names: bool = False
    #: ``status`` is a subresource: writes to the object keep the stored status.
    status_subresource: bool = False
    #: Created and answered, never stored (reviews).
    virtual: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods``, ``leases.coordination.k8s.io``: how messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: dict[tuple[str, str], Resource] = {
    (r.api_version, r.plural): r
    for r in (
        Resource("", "v1", "namespaces", "Namespace", False, label_names=True, status_subresource=True),
        Resource("", "v1", "pods", "Pod", True, status_subresource=True),
        Resource("", "v1", "secrets", "Secret", True),
        Resource("", "v1", "events", "Event", True),
        Resource("", "v1", "serviceaccounts", "ServiceAccount", True),
        Resource("", "v1", "services", "Service", True, status_subresource=True),
        Resource("", "v1", "configmaps", "ConfigMap", True),
        Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
        Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
        Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
        Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
        Resource("apps", "v1", "daemonsets", "DaemonSet", True, status_subresource=True),
        Resource(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            False,
            virtual=True,
        ),
    )
}


def resource_named(plural: str) -> Resource:
    """The resource with this plural name (``pods``, ``leases``, ...).

    Raises:
        KeyError: the stand-in serves no such resource.
    """
    for resource in RESOURCES.values():
        if resource.plural == plural:
            return resource
    raise KeyError(plural)


class ApiError(Exception):
    """A failed request: the HTTP code and the ``Status`` object answered with it."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``Status`` object, as the real server writes it."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    # -- the reasons the real server answers with ------------------------------------

    @classmethod
    def not_found(cls, resource: Resource, name: str) -> ApiError:
        return cls(404, "NotFound", f'{resource.qualified} "{name}" not found', _details(resource, name))

    @classmethod
    def already_exists(cls, resource: Resource, name: str) -> ApiError:
        return cls(
            409, "AlreadyExists", f'{resource.qualified} "{name}" already exists', _details(resource, name)
        )

    @classmethod
    def conflict(cls, resource: Resource, name: str) -> ApiError:
        message = (
            f'Operation cannot be fulfilled on {resource.qualified} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        return cls(409, "Conflict", message, _details(resource, name))

    @classmethod
    def invalid(cls, resource: Resource, name: str, causes: list[tuple[str, str]]) -> ApiError:
        """422 Invalid; ``causes`` are (field, message) pairs."""
        text = ", ".join(f"{f}: {m}" if f else m for f, m in causes)
        details = {
            "name": name,
            "group": resource.group,
            "kind": resource.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
        }
        return cls(422, "Invalid", f'{resource.kind} "{name}" is invalid: {text}', details)

    @classmethod
    def forbidden(cls, resource: Resource, name: str, why: str) -> ApiError:
        subject = f'{resource.qualified} "{name}"' if name else resource.qualified
        return cls(403, "Forbidden", f"{subject} is forbidden: {why}", _details(resource, name))

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def method_not_allowed(cls, message: str) -> ApiError:
        return cls(405, "MethodNotAllowed", message)

    @classmethod
    def unauthorized(cls) -> ApiError:
        return cls(401, "Unauthorized", "Unauthorized")

    @classmethod
    def no_such_path(cls) -> ApiError:
        return cls(404, "NotFound", "the server could not find the requested resource", {})


def _details(resource: Resource, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"group": resource.group, "kind": resource.plural}
    if name:
        details["name"] = name
    return details


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_RE = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_LABEL_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{_LABEL}')"
)
_SUBDOMAIN_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_LABEL}(\\.{_LABEL})*')"
)


def name_errors(resource: Resource, name: str) -> list[tuple[str, str]]:
    """Why ``name`` is not a valid ``metadata.name`` for ``resource`` ((field, message) pairs)."""
    if not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    if resource.label_names:
        if len(name) > 63:
            return [("metadata.name", f'Invalid value: "{name}": must be no more than 63 characters')]
        if not _LABEL_RE.fullmatch(name):
            return [("metadata.name", f'Invalid value: "{name}": {_LABEL_ERROR}')]
        return []
    if len(name) > 253:
        return [("metadata.name", f'Invalid value: "{name}": must be no more than 253 characters')]
    if not _SUBDOMAIN_RE.fullmatch(name):
        return [("metadata.name", f'Invalid value: "{name}": {_SUBDOMAIN_ERROR}')]
    return []

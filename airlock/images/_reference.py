"""Image references as Docker and the kubelet read them: ``[registry/]path[:tag][@digest]``.

The first component of the path is a registry only when it looks like a host: it has a dot or
a port, or is ``localhost`` (Docker's rule); ``team/image`` is a Docker Hub path, not a registry.
"""

from __future__ import annotations

import re

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _looks_like_host(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def split_reference(reference: str) -> tuple[str | None, str, str | None, str | None]:
    """``reference`` as (registry or None, path, tag or None, digest or None).

    Raises:
        ValueError: it is not a valid image reference (the message says which part).
    """
    rest, _, digest = reference.partition("@")
    if "@" in reference and not _DIGEST.match(digest):
        raise ValueError(f"{reference!r}: the digest must be sha256:<64 lowercase hex digits>")
    first, slash, remainder = rest.partition("/")
    registry = first if slash and _looks_like_host(first) else None
    if registry is not None:
        if not _HOST.match(registry):
            raise ValueError(f"{reference!r}: {registry!r} is not a registry host[:port]")
        rest = remainder
    path, colon, tag = rest.rpartition(":") if ":" in rest.rsplit("/", 1)[-1] else (rest, "", "")
    if not _PATH.match(path):
        raise ValueError(
            f"{reference!r}: {path!r} is not an image path (lowercase letters, digits, . _ - and /)"
        )
    if colon and not _TAG.match(tag):
        raise ValueError(f"{reference!r}: {tag!r} is not a tag (letters, digits, _ . -; at most 128)")
    return registry, path, tag or None, digest or None


def check_image_reference(reference: str) -> str:
    """``reference`` when it is a valid image reference (a digest reference included).

    Raises:
        ValueError: it is not one (the message says which part).
    """
    split_reference(reference)
    return reference


def image_registry(reference: str) -> str | None:
    """The registry ``reference`` names (None: a bare name the node's runtime resolves itself,
    Docker Hub or an image preloaded on the node).

    Raises:
        ValueError: it is not a valid image reference.
    """
    return split_reference(reference)[0]

"""Label and field selectors as the API server parses and applies them to a list.

Label selectors: ``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``, ``key in (a,b)`` and
``key notin (a,b)``, comma-separated (all must hold; ``!=`` and ``notin`` also match objects
without the label). Field selectors: ``field=v``, ``field==v``, ``field!=v`` over the fields
each resource supports (``metadata.name`` and ``metadata.namespace`` everywhere, plus e.g.
``status.phase`` for pods and ``involvedObject.name``/``uid`` for events); any other field is
a 400, as on the real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._kube_resources import ApiError, Resource

__all__ = ["Matcher", "field_selector", "label_selector"]

#: Whether an object (a full API object) is selected.
Matcher = Callable[[dict[str, Any]], bool]

_SET = re.compile(r"\s*([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)\s*")
_EQUALITY = re.compile(r"\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*")
_EXISTS = re.compile(r"\s*(!?)\s*([^\s!=(),]+)\s*")

_FIELDS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName"}
        | {"status.phase", "status.podIP", "status.nominatedNodeName"}
    ),
    "events": frozenset(
        {f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion")}
        | {"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}
    ),
    "secrets": frozenset({"type"}),
    "namespaces": frozenset({"status.phase"}),
}


def _requirements(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _label_requirement(text: str) -> Matcher:
    if m := _SET.fullmatch(text):
        key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda obj: _labels(obj).get(key) in values
        return lambda obj: _labels(obj).get(key) not in values
    if m := _EQUALITY.fullmatch(text):
        key, op, value = m.groups()
        if op == "!=":
            return lambda obj: _labels(obj).get(key) != value
        return lambda obj: _labels(obj).get(key) == value
    if m := _EXISTS.fullmatch(text):
        negated, key = m.group(1) == "!", m.group(2)
        return lambda obj: (key in _labels(obj)) != negated
    raise ApiError.bad_request(
        f"unable to parse requirement: found '{text.strip()}', expected a label requirement"
    )


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def label_selector(text: str | None) -> Matcher:
    """The matcher for a ``labelSelector`` query value (None or empty: everything).

    Raises:
        ApiError: 400 BadRequest for a requirement that does not parse.
    """
    if not text or not text.strip():
        return lambda _obj: True
    matchers = [_label_requirement(part) for part in _requirements(text)]
    return lambda obj: all(m(obj) for m in matchers)


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, dict):  # ``source`` selects on source.component
        value = value.get("component")
    return "" if value is None else str(value)


def field_selector(text: str | None, resource: Resource) -> Matcher:
    """The matcher for a ``fieldSelector`` query value on ``resource`` (None or empty: everything).

    Raises:
        ApiError: 400 BadRequest for a term that does not parse or a field not supported.
    """
    if not text or not text.strip():
        return lambda _obj: True
    supported = {"metadata.name", "metadata.namespace"} | _FIELDS.get(resource.plural, frozenset())
    terms: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*([^\s!=]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if not m:
            raise ApiError.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = m.groups()
        if field not in supported:
            raise ApiError.bad_request(f"field label not supported: {field}")
        terms.append((field, op == "!=", value))
    return lambda obj: all((_field_value(obj, f) == v) != negated for f, negated, v in terms)

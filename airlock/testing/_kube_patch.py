"""PATCH bodies as the API server applies them, for the content types the official client sends.

* ``application/merge-patch+json``: RFC 7386 (objects merge, ``null`` deletes, lists replace).
* ``application/strategic-merge-patch+json`` (what the client sends for a dict body): applied as
  a merge patch. The real server merges some lists by key (containers by name, ...) and knows
  ``$patch`` directives; the stand-in replaces lists and rejects directives (400).
* ``application/json-patch+json`` (what it sends for a list body): RFC 6902 (add, remove,
  replace, move, copy, test).

Server-side apply (``application/apply-patch+yaml``) is not emulated: 415 UnsupportedMediaType.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ._kube_resources import ApiError

__all__ = ["apply_patch"]

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def apply_patch(target: dict[str, Any], content_type: str, body: bytes) -> dict[str, Any]:
    """``target`` (unchanged) patched by ``body`` of ``content_type``: a new object.

    Raises:
        ApiError: 415 for an unsupported content type, 400 for a body that is not a valid patch,
            422 for a JSON patch ``test`` that fails or a path that does not exist.
    """
    kind = content_type.split(";")[0].strip().lower()
    if kind not in (MERGE, STRATEGIC, JSON_PATCH):
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{JSON_PATCH}, {MERGE}, {STRATEGIC} (the stand-in does not emulate server-side apply)",
        )
    try:
        patch = json.loads(body)
    except ValueError as e:
        raise ApiError.bad_request(f"error decoding patch: {e}") from e
    if kind == JSON_PATCH:
        if not isinstance(patch, list):
            raise ApiError.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        return _json_patch(copy.deepcopy(target), patch)
    if not isinstance(patch, dict):
        raise ApiError.bad_request(
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        )
    if kind == STRATEGIC and _has_directive(patch):
        raise ApiError.bad_request("the stand-in applies strategic merge patches without $ directives")
    merged = merge_patch(target, patch)
    assert isinstance(merged, dict)
    return merged


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``target`` merged with ``patch`` (a new value; neither argument changes)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _has_directive(value: Any) -> bool:
    if isinstance(value, dict):
        return any(str(k).startswith("$") or _has_directive(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_directive(v) for v in value)
    return False


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError.bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _unprocessable(f"jsonpatch: path {path!r} does not exist")
    return node, parts[-1]


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _unprocessable(f"jsonpatch: path {path!r} does not exist")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise _unprocessable("jsonpatch: cannot remove the whole document")
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _unprocessable(f"jsonpatch: path {path!r} does not exist")


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _unprocessable(f"jsonpatch: path {path!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise _unprocessable(f"jsonpatch: index {last!r} out of range in {path!r}")
    else:
        raise _unprocessable(f"jsonpatch: path {path!r} does not exist")
    return doc


def _json_patch(doc: dict[str, Any], operations: list[Any]) -> dict[str, Any]:
    result: Any = doc
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise ApiError.bad_request(f"jsonpatch: invalid operation {operation!r}")
        op, path = operation["op"], str(operation["path"])
        if op == "add":
            result = _add(result, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            _remove(result, path)
        elif op == "replace":
            result = _add(result, path, copy.deepcopy(operation.get("value")), replace=True)
        elif op in ("move", "copy"):
            source = str(operation.get("from", ""))
            value = _remove(result, source) if op == "move" else copy.deepcopy(_get(result, source))
            result = _add(result, path, value)
        elif op == "test":
            if _get(result, path) != operation.get("value"):
                raise _unprocessable(f"jsonpatch: test operation for path {path!r} failed")
        else:
            raise ApiError.bad_request(f"jsonpatch: unexpected operation {op!r}")
    if not isinstance(result, dict):
        raise ApiError.bad_request("jsonpatch: the patched document is not an object")
    return result

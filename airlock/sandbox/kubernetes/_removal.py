"""Removing sandbox objects in a safe order: pods first, their policies and Secrets after.

A pod is deleted with a grace period (:data:`POD_GRACE_S`: its runner gets SIGTERM, then
SIGKILL), not forced: a forced deletion removes the API object at once while the node may
still be stopping its containers. The pod stays (Terminating) until its kubelet confirms its
containers are gone; only a read answering 404 proves it. Until then the pod may still run,
so its NetworkPolicies and Secrets stay: deleting the policy of a running pod would leave it
unrestricted (beyond the namespace's default-deny) for as long as it lingers. What is not
confirmed gone within :data:`GONE_TIMEOUT_S` keeps its policies and Secrets, and is reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from layer0 import EnvError

from ._api import ApiFailure, KubeApi
from ._names import LABEL_JOB, LABEL_MANAGED, LABEL_OWNER, LABEL_SANDBOX, MANAGED_BY

__all__ = [
    "GONE_TIMEOUT_S",
    "MANAGED_SELECTOR",
    "POD_GRACE_S",
    "Removal",
    "delete_object",
    "delete_pods",
    "ensure_job_gone",
    "remove_selected",
    "retire_owner",
    "wait_pods_gone",
]

#: Selects every object a sandbox consists of (with an owner).
MANAGED_SELECTOR = f"{LABEL_MANAGED}={MANAGED_BY},{LABEL_OWNER}"

#: Seconds a deleted sandbox pod's containers get to stop before they are killed.
POD_GRACE_S = 5
#: How long a removal waits for its pods to be confirmed gone.
GONE_TIMEOUT_S = POD_GRACE_S + 25.0
_POLL_S = (0.05, 0.1, 0.2, 0.5, 1.0)


async def delete_object(
    api: KubeApi, deleter: Callable[..., Any], namespace: str, name: str, *, grace: int = 0
) -> ApiFailure | None:
    """Delete one object (``grace``: the pod's grace period); the failure, if any (an object
    already gone is none)."""
    try:
        await api.call(deleter, name, namespace, grace_period_seconds=grace, propagation_policy="Background")
    except ApiFailure as e:
        return None if e.status == 404 else e
    return None


async def wait_pods_gone(
    api: KubeApi,
    namespace: str,
    names: Iterable[str],
    timeout: float = GONE_TIMEOUT_S,  # noqa: ASYNC109
) -> list[str]:
    """Poll until each pod reads back 404; those still there (or unreadable) at ``timeout``."""
    left = list(dict.fromkeys(names))
    deadline = time.monotonic() + timeout
    polls = 0
    while left:
        still = []
        for name in left:
            try:
                await api.call(api.core.read_namespaced_pod, name, namespace)
            except ApiFailure as e:
                if e.status == 404:
                    continue
            still.append(name)
        left = still
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(_POLL_S[min(polls, len(_POLL_S) - 1)])
        polls += 1
    return left


async def delete_pods(
    api: KubeApi,
    namespace: str,
    names: Iterable[str],
    timeout: float = GONE_TIMEOUT_S,  # noqa: ASYNC109
) -> tuple[list[str], list[str]]:
    """Delete pods with :data:`POD_GRACE_S` and wait until they are gone: ``(not confirmed
    gone, problems)``. Only what is not in the first list may lose its policies and Secrets."""
    wanted = list(dict.fromkeys(names))
    failures = await asyncio.gather(
        *(delete_object(api, api.core.delete_namespaced_pod, namespace, n, grace=POD_GRACE_S) for n in wanted)
    )
    refused = [n for n, f in zip(wanted, failures, strict=True) if f is not None]
    problems = [f"Pod {n}: {f}" for n, f in zip(wanted, failures, strict=True) if f is not None]
    deleted = [n for n in wanted if n not in refused]
    left = await wait_pods_gone(api, namespace, deleted, timeout)
    problems += [f"Pod {n}: still there {timeout:g}s after its deletion" for n in left]
    return [*refused, *left], problems


@dataclass
class Removal:
    """What a removal deleted (``(kind, name)``), and what it could not."""

    removed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: The sandbox ids (and owners) of pods not confirmed gone: their other objects were kept.
    stuck_sandboxes: set[str] = field(default_factory=set)
    stuck_owners: set[str] = field(default_factory=set)


async def remove_selected(
    api: KubeApi, namespace: str, selector: str, doomed: Callable[[dict[str, Any]], bool]
) -> Removal:
    """Delete the sandbox objects matching ``selector`` that ``doomed`` picks: their pods first
    (with a grace period, confirmed gone), then the NetworkPolicies and Secrets of every sandbox
    none of whose pods remain (what cannot be listed is left alone)."""
    result = Removal()
    try:
        pods = [p for p in await _items(api, api.core.list_namespaced_pod, namespace, selector) if doomed(p)]
    except ApiFailure as e:
        result.errors.append(f"listing pods in {namespace}: {e}")
        return result
    names = [_name(p) for p in pods]
    left, problems = await delete_pods(api, namespace, names)
    result.errors += problems
    result.removed += [("pod", n) for n in names if n not in left]
    for pod in pods:
        if _name(pod) in left:
            result.stuck_sandboxes.add(_label(pod, LABEL_SANDBOX))
            result.stuck_owners.add(_label(pod, LABEL_OWNER))
    result.stuck_sandboxes.discard("")
    net = api.networking
    kinds: tuple[tuple[str, Any, Any], ...] = (
        ("networkpolicy", net.list_namespaced_network_policy, net.delete_namespaced_network_policy),
        ("secret", api.core.list_namespaced_secret, api.core.delete_namespaced_secret),
    )
    for kind, lister, deleter in kinds:
        try:
            found = await _items(api, lister, namespace, selector)
        except ApiFailure as e:
            result.errors.append(f"listing {kind}s in {namespace}: {e}")
            continue
        for obj in found:
            if not doomed(obj) or _label(obj, LABEL_SANDBOX) in result.stuck_sandboxes:
                continue
            failure = await delete_object(api, deleter, namespace, _name(obj))
            if failure is not None:
                result.errors.append(f"{kind} {_name(obj)}: {failure}")
            else:
                result.removed.append((kind, _name(obj)))
    return result


async def retire_owner(api: KubeApi, namespace: str, lease: str) -> Removal:
    """Remove every sandbox object of the owner Lease ``lease`` (see :func:`remove_selected`),
    then the Lease itself, unless some pod of it is not confirmed gone (the Lease's deletion
    would let the garbage collector take their policies)."""
    result = await remove_selected(api, namespace, f"{MANAGED_SELECTOR}={lease}", lambda _: True)
    if result.stuck_owners or result.errors:
        return result
    failure = await delete_object(api, api.coordination.delete_namespaced_lease, namespace, lease)
    if failure is not None:
        result.errors.append(f"lease {lease}: {failure}")
    else:
        result.removed.append(("lease", lease))
    return result


async def ensure_job_gone(api: KubeApi, namespace: str, job: str) -> None:
    """Remove every sandbox object labelled with ``job`` (pods confirmed gone first).

    Raises:
        EnvError: ``provision_failed`` when they cannot be listed, or a pod is not confirmed
            gone: the job must not resume while its previous sandbox may still run.
    """
    result = await remove_selected(
        api, namespace, f"{LABEL_MANAGED}={MANAGED_BY},{LABEL_JOB}={job}", lambda _: True
    )
    if result.errors:
        raise EnvError.provision_failed(
            f"job {job} is not resumed: its previous sandbox could not be confirmed gone, and its "
            f"tools must not run twice ({'; '.join(result.errors)})"
        )


async def _items(api: KubeApi, lister: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = await api.call(lister, namespace, label_selector=selector)
    return list(found.get("items") or [])


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _label(obj: dict[str, Any], key: str) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(key, ""))

"""Reading a pod's status: ready, still starting, or failed — and why, in words.

Pure functions over the Pod and Event objects as the API returns them (tested without a
cluster). A start that cannot succeed is reported at once (an image that cannot be pulled, a
container that cannot be configured, a pod that failed or ran past its deadline); one that
merely waits (Unschedulable, still pulling) is reported when the start timeout runs out, with
the same description.
"""

from __future__ import annotations

from typing import Any

__all__ = ["describe_pod", "oom_killed", "start_failure"]

#: Container waiting reasons that never resolve on their own.
_FATAL_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
_EVENT_LINES = 8


def _container_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def start_failure(pod: dict[str, Any]) -> str | None:
    """Why ``pod`` can no longer start (None: it is running or may still get there)."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        reason = status.get("reason") or ("the runner exited" if phase == "Succeeded" else "failed")
        return f"the pod {phase.lower()} ({reason})"
    for c in _container_statuses(pod):
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _FATAL_WAITING:
            return f"container {c.get('name')}: {waiting['reason']}"
        terminated = (c.get("state") or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            code, reason = terminated.get("exitCode"), terminated.get("reason")
            return f"container {c.get('name')} exited with code {code} ({reason})"
    return None


def oom_killed(pod: dict[str, Any]) -> bool:
    """Whether a container of ``pod`` was OOM-killed (now or in its last state)."""
    for c in _container_statuses(pod):
        for state in (c.get("state") or {}, c.get("lastState") or {}):
            if ((state.get("terminated") or {}).get("reason")) == "OOMKilled":
                return True
    return False


def describe_pod(pod: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The pod's phase, conditions, container states and last events, one fact per line."""
    status = pod.get("status") or {}
    lines = [
        f"phase: {status.get('phase', 'unknown')}"
        + (f" ({status['reason']})" if status.get("reason") else "")
    ]
    if status.get("message"):
        lines.append(f"message: {status['message']}")
    for cond in status.get("conditions") or []:
        if cond.get("status") != "True":
            detail = " ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
            lines.append(f"condition {cond.get('type')}=False" + (f": {detail}" if detail else ""))
    for c in _container_statuses(pod):
        for state, info in (c.get("state") or {}).items():
            detail = " ".join(
                str(info[k])
                for k in ("reason", "exitCode", "message")
                if isinstance(info, dict) and info.get(k)
            )
            lines.append(f"container {c.get('name')}: {state}" + (f" {detail}" if detail else ""))
    recent = sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    for e in recent[-_EVENT_LINES:]:
        lines.append(f"event {e.get('type', '')} {e.get('reason', '')}: {e.get('message', '')}".rstrip())
    return "\n".join(lines)

"""What runs a stand-in pod: the :class:`PodRuntime` protocol and :class:`ScriptedPods`.

:class:`~airlock.testing.KubeApiStandIn` stores Pod objects the way an API server does, but
leaves running them to a pod runtime (the part a kubelet plays): it calls ``start`` on create,
``status`` on every read, ``logs`` and ``connect`` for the ``log`` and ``portforward``
subresources, ``delete`` when the object goes. :class:`ScriptedPods` runs nothing: each pod
shows the status a test scripted (:class:`PodScript`), the log lines the test set, and forwards
ports to local servers the test exposed. ``DockerPods`` runs the containers for real.
"""

from __future__ import annotations

import errno
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

__all__ = ["EventRecorder", "PodRuntime", "PodScript", "ScriptedPods", "SecretReader"]

#: Records an Event on the pod: (type ``"Normal"`` | ``"Warning"``, reason, message).
EventRecorder = Callable[[str, str, str], None]
#: A Secret's decoded ``data`` by name (in the pod's namespace); None when there is no such Secret.
SecretReader = Callable[[str], Mapping[str, bytes] | None]

#: How often a followed log checks whether it should end (and the server whether its client left).
_FOLLOW_TICK_S = 0.2
#: The node every stand-in pod is scheduled on.
HOST_IP = "10.0.0.10"


@runtime_checkable
class PodRuntime(Protocol):
    """What runs a stand-in pod. Called from the server's request threads (blocking is fine)."""

    def start(self, pod: dict[str, Any], secrets: SecretReader, event: EventRecorder) -> None:
        """Begin running ``pod`` (a full Pod object as stored, metadata.uid set); return promptly."""

    def status(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod's current ``status`` (phase, podIP, conditions, containerStatuses,
        initContainerStatuses, reason, message, startTime) in the API's JSON shape."""

    def logs(
        self, pod: dict[str, Any], container: str, *, follow: bool, tail_lines: int | None
    ) -> Iterator[bytes]:
        """The container's log (chunks); with follow, until the container ends or the pod is deleted.

        An empty chunk is a heartbeat: the server uses it to notice a client that went away.
        """

    def connect(self, pod: dict[str, Any], port: int) -> socket.socket:
        """A TCP connection to the pod's ``port`` (port-forward). Raises OSError when it cannot."""

    def delete(self, pod: dict[str, Any]) -> None:
        """Stop and remove everything of ``pod`` (idempotent)."""

    def close(self) -> None:
        """Remove everything of every pod."""


@dataclass(frozen=True)
class PodScript:
    """What a scripted pod shows. Every field has a default: ``PodScript()`` is a running pod.

    The phase, unless given, follows from the rest: Pending while ``unschedulable``, within
    ``delay_s`` or ``waiting_reason``; Failed once ``terminated_reason``/``exit_code`` says a
    container ended (Succeeded on exit code 0); else Running.
    """

    #: The pod's phase; None derives it (see above).
    phase: str | None = None
    #: The pod's IP once it runs; None takes a fresh one (10.244.0.x, or fd00:10:244::x with
    #: ``ScriptedPods(ip_family=6)``).
    pod_ip: str | None = None
    #: Seconds the pod stays Pending (containers ``ContainerCreating``) after start or update.
    delay_s: float = 0.0
    #: A container state ``waiting`` with this reason (``ImagePullBackOff``, ``ErrImagePull``, ...).
    waiting_reason: str | None = None
    waiting_message: str = ""
    #: A container state ``terminated`` with this reason (``OOMKilled``, ``Error``, ...).
    terminated_reason: str | None = None
    #: The terminated container's exit code (default 1, 0 for a Succeeded pod).
    exit_code: int | None = None
    #: The container the waiting/terminated state applies to (an init or app container);
    #: None: every app container.
    container: str | None = None
    #: Whether running containers pass their readiness (the pod's Ready condition).
    ready: bool = True
    #: Not schedulable, with this scheduler message: PodScheduled False (Unschedulable), Pending.
    unschedulable: str | None = None
    #: The pod-level reason and message (e.g. ``DeadlineExceeded`` with phase Failed).
    reason: str | None = None
    message: str | None = None
    #: Events recorded on the pod when it starts: (type, reason, message).
    events: Sequence[tuple[str, str, str]] = field(default_factory=tuple)


@dataclass
class _Pod:
    """A started scripted pod."""

    uid: str
    pod: dict[str, Any]
    script: PodScript
    ip: str
    since: float  # monotonic time of start or the last update (delay_s counts from it)
    start_time: str
    deleted: bool = False


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod["metadata"]
    return str(meta.get("namespace") or "default"), str(meta["name"])


class ScriptedPods:
    """A :class:`PodRuntime` that runs nothing: pods show what the test scripted.

    ``script(pod)`` gives each pod its :class:`PodScript` when it starts (default: a running
    pod); :meth:`update` changes it later. :meth:`set_logs` and :meth:`expose` may be called
    before the pod exists (they are kept by namespace and name, across re-creations).

    ``ip_family`` is the family of the IPs it gives pods (a script's ``pod_ip`` aside): 4
    (``10.244.0.x``) or 6 (``fd00:10:244::x``, as an IPv6-only cluster such as kind's gives).

    Raises:
        ValueError: ``ip_family`` is neither 4 nor 6.
    """

    def __init__(
        self, script: Callable[[dict[str, Any]], PodScript] | None = None, *, ip_family: int = 4
    ) -> None:
        if ip_family not in (4, 6):
            raise ValueError(f"ip_family must be 4 or 6, got {ip_family!r}")
        self.ip_family = ip_family
        self.script = script or (lambda _pod: PodScript())
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._logs: dict[tuple[str, str, str], str] = {}
        self._ports: dict[tuple[str, str, int], int] = {}
        self._ips = itertools.count(2)
        self._closed = False
        self._changed = threading.Condition()

    # -- what tests call -------------------------------------------------------------

    def update(self, namespace: str, name: str, script: PodScript) -> None:
        """Show ``script`` for the running pod from now on (its ``delay_s`` counts from now).

        Raises:
            LookupError: no such pod has started.
        """
        with self._changed:
            entry = self._pods.get((namespace, name))
            if entry is None:
                raise LookupError(f"no scripted pod {namespace}/{name} has started")
            entry.script = script
            entry.since = time.monotonic()
            if script.pod_ip:
                entry.ip = script.pod_ip
            self._changed.notify_all()

    def set_logs(self, namespace: str, name: str, container: str, text: str) -> None:
        """The container's whole log from now on (a follower receives what ``text`` adds)."""
        with self._changed:
            self._logs[(namespace, name, container)] = text
            self._changed.notify_all()

    def expose(self, namespace: str, name: str, port: int, host_port: int) -> None:
        """Port-forwards to the pod's ``port`` reach ``127.0.0.1:host_port``."""
        with self._changed:
            self._ports[(namespace, name, port)] = host_port

    # -- PodRuntime ------------------------------------------------------------------

    def start(self, pod: dict[str, Any], secrets: SecretReader, event: EventRecorder) -> None:
        """Remember ``pod`` with its script; record the script's events."""
        script = self.script(pod)
        with self._changed:
            n = next(self._ips)
            ip = script.pod_ip or self._pod_ip(n)
            self._pods[_key(pod)] = _Pod(
                uid=str(pod["metadata"]["uid"]),
                pod=pod,
                script=script,
                ip=ip,
                since=time.monotonic(),
                start_time=_now(),
            )
            self._changed.notify_all()
        for kind, reason, message in script.events:
            event(kind, reason, message)

    def _pod_ip(self, n: int) -> str:
        """The ``n``-th pod IP of this runtime's family."""
        if self.ip_family == 6:
            return f"fd00:10:244::{n:x}"
        return f"10.244.{n // 250}.{n % 250 + 1}"

    def status(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The status the pod's script gives now (Pending for a pod not started here)."""
        with self._changed:
            entry = self._entry(pod)
            if entry is None:
                return {"phase": "Pending", "qosClass": qos_class(pod)}
            return _scripted_status(entry, time.monotonic())

    def logs(
        self, pod: dict[str, Any], container: str, *, follow: bool, tail_lines: int | None
    ) -> Iterator[bytes]:
        """The text :meth:`set_logs` gave; with ``follow``, then what it adds, until the pod
        is deleted or the container terminated."""
        namespace, name = _key(pod)
        key = (namespace, name, container)
        with self._changed:
            sent = self._logs.get(key, "")
        yield _tail(sent, tail_lines).encode()
        while follow:
            with self._changed:
                self._changed.wait(_FOLLOW_TICK_S)
                text = self._logs.get(key, "")
                entry = self._entry(pod)
                ended = self._closed or entry is None or entry.deleted
                if entry is not None and not ended:
                    ended = _container_terminated(_scripted_status(entry, time.monotonic()), container)
            if text != sent:
                yield (text[len(sent) :] if text.startswith(sent) else text).encode()
                sent = text
            elif not ended:
                yield b""
            if ended:
                return

    def connect(self, pod: dict[str, Any], port: int) -> socket.socket:
        """A connection to the local server :meth:`expose` named for this pod and port."""
        namespace, name = _key(pod)
        with self._changed:
            host_port = self._ports.get((namespace, name, port))
        if host_port is None:
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"connect {name}:{port}: connection refused")
        sock = socket.create_connection(("127.0.0.1", host_port), timeout=5)
        sock.settimeout(None)
        return sock

    def delete(self, pod: dict[str, Any]) -> None:
        """Forget the pod (its followers end)."""
        with self._changed:
            entry = self._entry(pod)
            if entry is not None:
                entry.deleted = True
                del self._pods[_key(pod)]
            self._changed.notify_all()

    def close(self) -> None:
        """Forget every pod; every follower ends."""
        with self._changed:
            for entry in self._pods.values():
                entry.deleted = True
            self._pods.clear()
            self._closed = True
            self._changed.notify_all()

    def _entry(self, pod: dict[str, Any]) -> _Pod | None:
        entry = self._pods.get(_key(pod))
        if entry is None or entry.uid != str(pod["metadata"].get("uid")):
            return None
        return entry


def _tail(text: str, lines: int | None) -> str:
    if lines is None:
        return text
    if lines <= 0:
        return ""
    return "".join(text.splitlines(keepends=True)[-lines:])


def _container_terminated(status: dict[str, Any], container: str) -> bool:
    for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if c.get("name") == container:
            return "terminated" in (c.get("state") or {})
    return False


def qos_class(pod: dict[str, Any]) -> str:
    """The pod's QoS class from its containers' requests and limits (as the API server sets it)."""
    containers = [*(pod["spec"].get("initContainers") or []), *(pod["spec"].get("containers") or [])]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        set(r.get("limits") or {}) >= {"cpu", "memory"}
        and all((r.get("requests") or {}).get(k, v) == v for k, v in (r.get("limits") or {}).items())
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def condition(
    kind: str, ok: bool, at: str, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """A pod condition as the kubelet writes it (shared by every PodRuntime here)."""
    cond: dict[str, Any] = {"type": kind, "status": "True" if ok else "False", "lastTransitionTime": at}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _scripted_status(entry: _Pod, now: float) -> dict[str, Any]:
    """The Pod ``status`` a kubelet would report for ``entry``'s script at monotonic time ``now``."""
    script, spec, at = entry.script, entry.pod["spec"], entry.start_time
    status: dict[str, Any] = {"qosClass": qos_class(entry.pod)}
    if script.unschedulable is not None:
        status["phase"] = script.phase or "Pending"
        status["conditions"] = [condition("PodScheduled", False, at, "Unschedulable", script.unschedulable)]
        return _with_reason(status, script)
    status.update(hostIP=HOST_IP, hostIPs=[{"ip": HOST_IP}], startTime=at)
    creating = now - entry.since < script.delay_s
    init_states = [
        (c, _state(script, c, init=True, creating=creating, at=at)) for c in spec.get("initContainers") or []
    ]
    initialized = all("terminated" in s and s["terminated"]["exitCode"] == 0 for _, s in init_states)
    app_states = [
        (
            c,
            _state(script, c, init=False, creating=creating, at=at)
            if initialized
            else _waiting("PodInitializing"),
        )
        for c in spec.get("containers") or []
    ]
    all_states = [s for _, s in (*init_states, *app_states)]
    failed = any("terminated" in s and s["terminated"]["exitCode"] != 0 for s in all_states)
    if script.phase:
        phase = script.phase
    elif failed:
        phase = "Failed"
    elif creating or any("waiting" in s for s in all_states):
        phase = "Pending"
    elif app_states and all("terminated" in s for _, s in app_states):
        phase = "Succeeded"
    else:
        phase = "Running"
    status["phase"] = phase
    if not creating:
        status.update(podIP=entry.ip, podIPs=[{"ip": entry.ip}])
    ready_containers = all("running" in s for _, s in app_states) and script.ready
    status["conditions"] = [
        condition("PodReadyToStartContainers", not creating, at),
        condition("Initialized", initialized, at, None if initialized else "ContainersNotInitialized"),
        condition("Ready", ready_containers, at, None if ready_containers else "ContainersNotReady"),
        condition(
            "ContainersReady", ready_containers, at, None if ready_containers else "ContainersNotReady"
        ),
        condition("PodScheduled", True, at),
    ]
    if init_states:
        status["initContainerStatuses"] = [
            _container_status(entry, c, s, script, init=True) for c, s in init_states
        ]
    status["containerStatuses"] = [_container_status(entry, c, s, script, init=False) for c, s in app_states]
    return _with_reason(status, script)


def _with_reason(status: dict[str, Any], script: PodScript) -> dict[str, Any]:
    if script.reason:
        status["reason"] = script.reason
    if script.message:
        status["message"] = script.message
    return status


def _waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def _state(
    script: PodScript, container: dict[str, Any], *, init: bool, creating: bool, at: str
) -> dict[str, Any]:
    """One container's ``state`` under ``script``."""
    targeted = script.container == container["name"] or (script.container is None and not init)
    if creating:
        return _waiting("PodInitializing" if init else "ContainerCreating")
    if targeted and script.waiting_reason:
        return _waiting(script.waiting_reason, script.waiting_message)
    ended = (
        script.terminated_reason is not None
        or script.exit_code is not None
        or script.phase in ("Succeeded", "Failed")
    )
    if targeted and ended:
        code = script.exit_code if script.exit_code is not None else (0 if script.phase == "Succeeded" else 1)
        reason = script.terminated_reason or ("Completed" if code == 0 else "Error")
        return {"terminated": {"exitCode": code, "reason": reason, "startedAt": at, "finishedAt": _now()}}
    if init:
        return {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at}}
    return {"running": {"startedAt": at}}


def _container_status(
    entry: _Pod, container: dict[str, Any], state: dict[str, Any], script: PodScript, *, init: bool
) -> dict[str, Any]:
    started = "waiting" not in state
    running = "running" in state
    status: dict[str, Any] = {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": f"stand-in://{container.get('image', '')}" if started else "",
        "ready": (running and script.ready)
        or (init and "terminated" in state and state["terminated"]["exitCode"] == 0),
        "restartCount": 0,
        "started": running,
        "state": state,
    }
    if started:
        status["containerID"] = f"stand-in://{entry.uid}/{container['name']}"
        if "terminated" in state:
            state["terminated"]["containerID"] = status["containerID"]
    return status

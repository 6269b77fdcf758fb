"""Stand-in Kubernetes pods run for real on the local Docker engine: :class:`DockerPods`.

:class:`~airlock.testing.KubeApiStandIn` leaves running pods to a
:class:`~airlock.testing.PodRuntime` (the kubelet's part). ``DockerPods`` is the one that runs
them: each pod's containers become Docker containers on one bridge network (the "pod
network"), so a pod's IP is reachable from this host, its Secrets become files and
environment variables, and a job can complete end to end through the Kubernetes backend.

**What it does, as a kubelet would:** init containers run first, one after another, each to
completion; then every app container. ``emptyDir`` volumes are Docker volumes (over a host
directory of the pod; ``medium: Memory``: a tmpfs of ``sizeLimit`` mounted there, which needs
root, as the kubelet does) shared by the pod's containers; ``secret`` volumes are files
written into a private host directory and bound read-only (``subPath`` binds one file). Both
get the kubelet's fsGroup handling: an emptyDir is world-writable (group ``fsGroup``, setgid);
secret files are owned ``0:<fsGroup>`` and made group-readable. The securityContext
(container over pod) maps to Docker's user, groups, read-only root, capabilities,
no-new-privileges and privileged; memory and CPU limits to Docker's; ``runtimeClassName`` to
a Docker runtime. Images are never pulled (``ErrImageNeverPull`` when missing, as with
``imagePullPolicy: Never``). A missing Secret or key leaves the pod Pending
(``FailedMount``, ``CreateContainerConfigError``) and is retried, as the kubelet does.
``activeDeadlineSeconds`` kills the pod (phase Failed, reason ``DeadlineExceeded``). Events
are recorded on the way (Scheduled, Pulled, Created, Started, Killing, OOMKilling, ...).

**Where it differs:** there is no pause container: ``podIP`` is the first app container's
address, the other app containers share its network namespace, and init containers each have
an address of their own. Probes are not run (a running container is ready). Containers are
never restarted (every ``restartPolicy`` acts as ``Never``). App containers start together,
once all of them can. A disk emptyDir's ``sizeLimit`` and ``ephemeral-storage`` are not enforced.
Cluster DNS is not emulated: a ``ClusterFirst`` pod resolves nothing (no query leaves this
machine). Unsupported pod features (hostPath and other volume kinds, host namespaces, an unknown
RuntimeClass, ...) fail the pod with a Warning event instead of running it half right.
Extended resources (``nvidia.com/gpu``) leave it unschedulable.

Every Docker object of a pod carries the label ``airlock.kube-standin=<pod uid>`` (and each
object the runtime makes, its network too, ``airlock.kube-standin.runtime=<runtime id>``).
It needs the Docker engine on this machine (it binds host directories) and root (file
ownership, tmpfs mounts), as a kubelet does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from ._kube_pods import EventRecorder, SecretReader, condition, qos_class

__all__ = ["LABEL_POD", "LABEL_RUNTIME", "DockerPods"]

#: The label on every Docker object of a pod: its ``metadata.uid``.
LABEL_POD = "airlock.kube-standin"
#: The label on every Docker object a :class:`DockerPods` made: that runtime's id.
LABEL_RUNTIME = "airlock.kube-standin.runtime"

#: The node every pod is scheduled on (as in the Scheduled event).
_NODE = "stand-in-node"
#: How often a running pod's containers are checked (ends, deadline).
_POLL_S = 0.2
#: How often what cannot start yet (missing image, Secret, key) is tried again.
_RETRY_S = 1.0
#: How often a followed log yields a heartbeat (an empty chunk) while nothing comes.
_FOLLOW_TICK_S = 0.2
#: How long ``delete`` waits for a pod's worker to notice it should stop.
_JOIN_S = 30.0
#: The resources a stand-in node has; a pod asking for any other cannot be scheduled.
_NODE_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_SUPPORTED_VOLUMES = ("emptyDir", "secret")

_T = TypeVar("_T")


# --- what a pod run is -------------------------------------------------------------------


class _Stopped(Exception):
    """The pod was deleted, or its deadline passed (already handled): the worker ends."""


class _Waiting(Exception):
    """A container cannot start yet; the kubelet would retry (and so does the worker)."""

    def __init__(self, reason: str, message: str, events: list[tuple[str, str, str]]) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.events = events


class _PodFailure(Exception):
    """The pod cannot run here: phase Failed, with a Warning event."""

    def __init__(self, event_reason: str, message: str, pod_reason: str | None = None) -> None:
        super().__init__(message)
        self.event_reason = event_reason
        self.message = message
        self.pod_reason = pod_reason


def _config_error(message: str) -> _Waiting:
    return _Waiting("CreateContainerConfigError", message, [("Warning", "Failed", f"Error: {message}")])


@dataclass(frozen=True)
class _Volume:
    """A prepared pod volume: a Docker volume (emptyDir) or a host directory bound read-only (secret)."""

    kind: Literal["volume", "bind"]
    source: str


@dataclass
class _ContainerRun:
    name: str
    spec: dict[str, Any]
    init: bool
    waiting: tuple[str, str]
    docker_id: str | None = None


@dataclass
class _PodRun:
    uid: str
    pod: dict[str, Any]
    secrets: SecretReader
    event: EventRecorder
    workdir: Path
    start_time: str
    started: float  # monotonic, for activeDeadlineSeconds
    containers: list[_ContainerRun]
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    volumes: dict[str, _Volume] = field(default_factory=dict)
    reported: set[tuple[str, str, str]] = field(default_factory=set)
    ips: tuple[str, ...] = ()  # the pod's IPs, its primary family first
    sandbox_ready: bool = False  # volumes prepared: containers can start
    unschedulable: str | None = None
    failure: tuple[str | None, str] | None = None  # (pod reason, message): phase Failed
    thread: threading.Thread | None = None

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"].get("namespace") or "default")

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.pod.get("spec") or {}
        return spec


# --- the runtime ---------------------------------------------------------------------------


def _network_options(runtime_id: str, ipv6_subnet: str | None) -> dict[str, Any]:
    """``networks.create`` options of the pod network (dual-stack with ``ipv6_subnet``).

    Raises:
        ValueError: ``ipv6_subnet`` is not an IPv6 network.
    """
    options: dict[str, Any] = {"driver": "bridge", "labels": {LABEL_RUNTIME: runtime_id}}
    if ipv6_subnet is not None:
        import ipaddress

        import docker

        subnet = ipaddress.ip_network(ipv6_subnet)
        if subnet.version != 6:
            raise ValueError(f"ipv6_subnet must be an IPv6 network, got {ipv6_subnet!r}")
        options["enable_ipv6"] = True
        options["ipam"] = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=str(subnet))])
    return options


class DockerPods:
    """A :class:`~airlock.testing.PodRuntime` that runs each pod's containers on the local Docker engine.

    Args:
        network: the Docker bridge network pods join (their "pod network"); created when it
            does not exist (and then removed by :meth:`close`). Default: a fresh one.
        runtime_handlers: RuntimeClass name (a pod's ``runtimeClassName``) to the Docker runtime
            that runs it (``{"gvisor": "runsc"}``). A pod naming another RuntimeClass fails.
        client: a ``docker.DockerClient`` (default: ``docker.from_env()``).
        ipv6_subnet: an IPv6 subnet (a ULA ``/64``, e.g. ``fd12:3456:789a:1::/64``) for the
            pod network this runtime creates: the network is dual-stack and each pod's
            ``podIP`` is its IPv6 address (``podIPs``: IPv6, then IPv4), as on an IPv6-primary
            cluster. Given with an existing ``network``, that network must have IPv6 enabled.

    Raises:
        ValueError: ``ipv6_subnet`` with an existing ``network`` that has no IPv6.
    """

    def __init__(
        self,
        *,
        network: str | None = None,
        runtime_handlers: Mapping[str, str] | None = None,
        client: Any = None,
        ipv6_subnet: str | None = None,
    ) -> None:
        import docker

        self._client: Any = client if client is not None else docker.from_env(max_pool_size=64)
        self._api: Any = self._client.api
        #: This runtime's id (the value of :data:`LABEL_RUNTIME` on what it makes).
        self.id = secrets.token_hex(6)
        self._runtime_handlers = dict(runtime_handlers or {})
        self._runs: dict[str, _PodRun] = {}
        self._lock = threading.Lock()
        self._closed = False
        name = network or f"airlock-kube-pods-{self.id}"
        try:
            self._network: Any = self._client.networks.get(name)
            self._own_network = False
        except docker.errors.NotFound:
            self._network = self._client.networks.create(name, **_network_options(self.id, ipv6_subnet))
            self._own_network = True
        #: The pod network's name.
        self.network = name
        #: Whether pods get an IPv6 podIP first (an IPv6-primary dual-stack pod network).
        self.ipv6 = ipv6_subnet is not None
        if self.ipv6 and not self._network.attrs.get("EnableIPv6"):
            raise ValueError(f"the pod network {name} has no IPv6 (ipv6_subnet needs one that has)")
        configs = (self._network.attrs.get("IPAM") or {}).get("Config") or [{}]
        self._host_ip: str | None = next((c["Gateway"] for c in configs if c.get("Gateway")), None)
        self._root = Path(tempfile.mkdtemp(prefix="airlock-kube-pods-"))  # 0700: secrets live here

    # -- PodRuntime ------------------------------------------------------------------

    def start(self, pod: dict[str, Any], secrets: SecretReader, event: EventRecorder) -> None:
        """Run ``pod`` from a background thread (volumes, init containers, app containers)."""
        if self._closed:
            raise RuntimeError("DockerPods is closed")
        uid = str(pod["metadata"]["uid"])
        spec = pod.get("spec") or {}
        has_init = bool(spec.get("initContainers"))
        containers = [
            _ContainerRun(c["name"], c, init=True, waiting=("PodInitializing", ""))
            for c in spec.get("initContainers") or []
        ] + [
            _ContainerRun(
                c["name"], c, init=False, waiting=("PodInitializing" if has_init else "ContainerCreating", "")
            )
            for c in spec.get("containers") or []
        ]
        run = _PodRun(
            uid=uid,
            pod=pod,
            secrets=secrets,
            event=event,
            workdir=self._root / uid,
            start_time=_now(),
            started=time.monotonic(),
            containers=containers,
        )
        with self._lock:
            previous = self._runs.get(uid)
        if previous is not None:
            self.delete(previous.pod)
        with self._lock:
            self._runs[uid] = run
        run.thread = threading.Thread(target=self._work, args=(run,), name=f"pod-{run.name}", daemon=True)
        run.thread.start()

    def status(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod's status from its containers' Docker state now."""
        run = self._run_of(pod)
        if run is None:
            return {"phase": "Pending", "qosClass": qos_class(pod)}
        return self._status_of(run)

    def logs(
        self, pod: dict[str, Any], container: str, *, follow: bool, tail_lines: int | None
    ) -> Iterator[bytes]:
        """``docker logs`` of the container (stdout and stderr); with ``follow``, until it ends."""
        docker_id = self._docker_id(pod, container)
        if docker_id is None:
            return
        import docker

        tail: int | str = "all" if tail_lines is None else max(tail_lines, 0)
        if not follow:
            with contextlib.suppress(docker.errors.NotFound):
                yield self._api.logs(docker_id, stdout=True, stderr=True, stream=False, tail=tail)
            return
        try:
            stream = self._api.logs(docker_id, stdout=True, stderr=True, stream=True, follow=True, tail=tail)
        except docker.errors.NotFound:
            return
        yield from _pumped(stream)

    def connect(self, pod: dict[str, Any], port: int) -> socket.socket:
        """A TCP connection to ``podIP:port`` (the pod network is reachable from this host)."""
        run = self._run_of(pod)
        ips = self._pod_ips(run) if run is not None else ()
        ip = ips[0] if ips else None
        if ip is None:
            name = pod["metadata"]["name"]
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"pod {name} has no IP yet (port {port})")
        sock = socket.create_connection((ip, port), timeout=5)
        sock.settimeout(None)
        return sock

    def delete(self, pod: dict[str, Any]) -> None:
        """Stop the pod's worker, remove its containers, volumes and files (idempotent)."""
        uid = str(pod["metadata"].get("uid"))
        with self._lock:
            run = self._runs.pop(uid, None)
        if run is not None:
            run.stop.set()
            if run.thread is not None and run.thread is not threading.current_thread():
                run.thread.join(_JOIN_S)
            for c in self._running(run):
                self._report(run, "Normal", "Killing", f"Stopping container {c.name}")
        self._remove_labelled(f"{LABEL_POD}={uid}")
        _unmount_under(self._root / uid)
        shutil.rmtree(self._root / uid, ignore_errors=True)

    def close(self) -> None:
        """Remove every pod, and the network and directory this runtime made."""
        self._closed = True
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            self.delete(run.pod)
        self._remove_labelled(f"{LABEL_RUNTIME}={self.id}")
        if self._own_network:
            import docker

            with contextlib.suppress(docker.errors.NotFound):
                self._network.remove()
        _unmount_under(self._root)
        shutil.rmtree(self._root, ignore_errors=True)

    # -- the worker: one thread per pod ----------------------------------------------

    def _work(self, run: _PodRun) -> None:
        try:
            self._lifecycle(run)
        except _Stopped:
            return
        except _PodFailure as failure:
            self._fail(run, failure)
        except Exception as e:  # a Docker or host error: the pod fails with it rather than hang Pending
            if not run.stop.is_set():
                self._fail(run, _PodFailure("Failed", f"Error: {_explain(e)}"))

    def _lifecycle(self, run: _PodRun) -> None:
        spec = run.spec
        shortage = _unschedulable(spec)
        if shortage is not None:
            with run.lock:
                run.unschedulable = shortage
            self._report(run, "Warning", "FailedScheduling", shortage)
            return
        self._report(
            run, "Normal", "Scheduled", f"Successfully assigned {run.namespace}/{run.name} to {_NODE}"
        )
        _check_supported(spec)
        runtime = self._docker_runtime(spec)
        self._until(run, partial(self._prepare_volumes, run), None)
        for c in (c for c in run.containers if c.init):
            self._create_and_start(run, c, self._until(run, partial(self._config, run, c, runtime), c))
            self._wait_ended(run, [c])
            if self._exit_code(c) != 0:
                return  # restartPolicy Never: the pod has failed (its status says so)
        apps = [c for c in run.containers if not c.init]
        if not apps:
            return
        # Every app container must be able to start before any does: the others join the
        # first one's network namespace (the pod's), which must be running first.
        configs = [self._until(run, partial(self._config, run, c, runtime), c) for c in apps]
        main_id = self._create_and_start(run, apps[0], configs[0])
        with run.lock:
            run.ips = self._ips_of(main_id)
        for c, config in zip(apps[1:], configs[1:], strict=True):
            for own in ("network", "hostname", "dns", "dns_search", "dns_opt"):
                config.pop(own, None)
            self._create_and_start(run, c, {**config, "network_mode": f"container:{main_id}"})
        self._wait_ended(run, apps)

    def _until(self, run: _PodRun, attempt: Callable[[], _T], container: _ContainerRun | None) -> _T:
        """``attempt()`` until it does not raise :class:`_Waiting` (recording why it waits)."""
        while True:
            self._check(run)
            try:
                return attempt()
            except _Waiting as waiting:
                if container is not None:
                    with run.lock:
                        container.waiting = (waiting.reason, waiting.message)
                for kind, reason, message in waiting.events:
                    self._report(run, kind, reason, message)
            self._pause(run, _RETRY_S)

    def _check(self, run: _PodRun) -> None:
        """Raise :class:`_Stopped` once the pod is deleted or (killing it) past its deadline."""
        if run.stop.is_set():
            raise _Stopped
        deadline = run.spec.get("activeDeadlineSeconds")
        if deadline is not None and time.monotonic() - run.started >= float(deadline):
            self._expire(run)
            raise _Stopped

    def _pause(self, run: _PodRun, seconds: float) -> None:
        if run.stop.wait(seconds):
            raise _Stopped
        self._check(run)

    def _wait_ended(self, run: _PodRun, containers: list[_ContainerRun]) -> None:
        """Until every one of ``containers`` has ended (an OOM kill recorded as the node would)."""
        running = list(containers)
        while running:
            for c in list(running):
                state = self._inspect(c)
                if state is None or state.get("Status") in ("exited", "dead"):
                    running.remove(c)
                    if state is not None and state.get("OOMKilled"):
                        limit = _memory_limit(c.spec)
                        self._report(
                            run,
                            "Warning",
                            "OOMKilling",
                            f"Memory cgroup out of memory: killed the process of container {c.name}"
                            + (f" (limit {limit} bytes)" if limit else ""),
                        )
            if running:
                self._pause(run, _POLL_S)

    def _expire(self, run: _PodRun) -> None:
        """activeDeadlineSeconds has passed: kill the containers, fail the pod."""
        message = "Pod was active on the node longer than the specified deadline"
        with run.lock:
            if run.failure is not None:
                return
            run.failure = ("DeadlineExceeded", message)
        self._report(run, "Warning", "DeadlineExceeded", message)
        grace = int(run.spec.get("terminationGracePeriodSeconds", 30))
        for c in self._running(run):
            self._report(run, "Normal", "Killing", f"Stopping container {c.name}")
            self._stop_container(c, grace)

    def _fail(self, run: _PodRun, failure: _PodFailure) -> None:
        with run.lock:
            if run.failure is None:
                run.failure = (failure.pod_reason, failure.message)
        self._report(run, "Warning", failure.event_reason, failure.message)
        for c in self._running(run):
            self._stop_container(c, 0)

    # -- volumes ---------------------------------------------------------------------

    def _prepare_volumes(self, run: _PodRun) -> None:
        """Every volume of the pod (secret ones may wait for their Secret)."""
        fs_group = _pod_security(run.spec).get("fsGroup")
        run.workdir.mkdir(mode=0o700, exist_ok=True)
        for volume in run.spec.get("volumes") or []:
            name = str(volume["name"])
            if name in run.volumes:
                continue
            if "secret" in volume:
                path = _write_secret_volume(run, name, volume["secret"], fs_group)
                run.volumes[name] = _Volume("bind", str(path))
            else:
                run.volumes[name] = self._empty_dir(run, name, volume.get("emptyDir") or {}, fs_group)
        with run.lock:
            run.sandbox_ready = True

    def _empty_dir(self, run: _PodRun, name: str, source: Mapping[str, Any], fs_group: int | None) -> _Volume:
        """A Docker volume over a host directory of the pod, writable by every user of the pod
        as the kubelet's emptyDir is (mode 0777; with an fsGroup: group fsGroup and setgid).

        ``medium: Memory`` mounts a tmpfs of ``sizeLimit`` on that directory first, as the
        kubelet does. (A Docker volume of the local driver's tmpfs type would not do: Docker
        mounts it afresh whenever no running container holds it, so what an init container
        wrote would be gone for the next container.)
        """
        gid = int(fs_group) if fs_group is not None else 0
        mode = 0o2777 if fs_group is not None else 0o777
        host_dir = run.workdir / f"empty-{name}"
        host_dir.mkdir(exist_ok=True)
        if source.get("medium") == "Memory" and not os.path.ismount(host_dir):
            options = [f"uid=0,gid={gid},mode={mode:o}"]
            if source.get("sizeLimit") is not None:
                options.insert(0, f"size={_bytes(source['sizeLimit'])}")
            _mount_tmpfs(host_dir, ",".join(options))
        os.chown(host_dir, 0, gid)
        os.chmod(host_dir, mode)
        volume = self._client.volumes.create(
            name=f"k8s_{run.uid}_{name}",
            driver="local",
            driver_opts={"type": "none", "o": "bind", "device": str(host_dir)},
            labels=self._labels(run),
        )
        return _Volume("volume", str(volume.name))

    # -- containers ------------------------------------------------------------------

    def _config(self, run: _PodRun, c: _ContainerRun, runtime: str | None) -> dict[str, Any]:
        """The ``containers.create`` arguments for ``c``; :class:`_Waiting` while it cannot start yet."""
        from docker.types import Mount

        spec, pod_spec = c.spec, run.spec
        image = str(spec.get("image") or "")
        image_user = self._image_user(run, image)
        security = _container_security(pod_spec, spec)
        _check_non_root(security, image_user, c.name)
        env = _environment(run, spec)
        mounts = [Mount(**m) for m in _mounts(run, spec)]
        config: dict[str, Any] = {
            "image": image,
            "name": f"k8s_{c.name}_{run.name}_{run.namespace}_{run.uid}_0",
            "labels": {**self._labels(run), "io.kubernetes.container.name": c.name},
            "environment": [f"{k}={v}" for k, v in env.items()],
            "mounts": mounts,
            "read_only": bool(security.get("readOnlyRootFilesystem")),
            "privileged": bool(security.get("privileged")),
            "cap_add": list((security.get("capabilities") or {}).get("add") or []) or None,
            "cap_drop": list((security.get("capabilities") or {}).get("drop") or []) or None,
            "security_opt": _security_opt(security) or None,
            "user": _docker_user(security, image_user),
            "group_add": _groups(pod_spec) or None,
            "tty": bool(spec.get("tty")),
            "stdin_open": bool(spec.get("stdin")),
        }
        if spec.get("command") is not None:
            config["entrypoint"] = [_expand(str(a), env) for a in spec["command"]]
        if spec.get("args") is not None:
            config["command"] = [_expand(str(a), env) for a in spec["args"]]
        if spec.get("workingDir"):
            config["working_dir"] = str(spec["workingDir"])
        if runtime is not None:
            config["runtime"] = runtime
        limits = (spec.get("resources") or {}).get("limits") or {}
        if limits.get("memory") is not None:
            config["mem_limit"] = config["memswap_limit"] = _bytes(limits["memory"])
        if limits.get("cpu") is not None:
            config["nano_cpus"] = int(_quantity(limits["cpu"]) * 10**9)
        # Its own place on the pod network (a second app container trades it for the first one's).
        config["network"] = self.network
        config["hostname"] = run.name[:63]
        config.update(_dns(pod_spec))
        return config

    def _image_user(self, run: _PodRun, image: str) -> str:
        """The image's configured user; raises :class:`_Waiting` (ErrImageNeverPull) when it is absent."""
        import docker

        try:
            found = self._client.images.get(image)
        except docker.errors.ImageNotFound:
            message = f'Container image "{image}" is not present with pull policy of Never'
            raise _Waiting(
                "ErrImageNeverPull",
                message,
                [
                    ("Warning", "ErrImageNeverPull", message),
                    ("Warning", "Failed", "Error: ErrImageNeverPull"),
                ],
            ) from None
        self._report(run, "Normal", "Pulled", f'Container image "{image}" already present on machine')
        return str((found.attrs.get("Config") or {}).get("User") or "")

    def _create_and_start(self, run: _PodRun, c: _ContainerRun, config: dict[str, Any]) -> str:
        import docker

        self._check(run)
        container = self._client.containers.create(**config)
        with run.lock:
            c.docker_id = str(container.id)
        self._report(run, "Normal", "Created", f"Created container {c.name}")
        self._check(run)
        try:
            container.start()
        except docker.errors.APIError as e:
            raise _PodFailure("Failed", f"Error: {_explain(e)}") from e
        self._report(run, "Normal", "Started", f"Started container {c.name}")
        return str(container.id)

    def _stop_container(self, c: _ContainerRun, grace: int) -> None:
        import docker

        if c.docker_id is None:
            return
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            self._api.stop(c.docker_id, timeout=grace)

    def _inspect(self, c: _ContainerRun) -> dict[str, Any] | None:
        """The container's Docker ``State`` (None: it is gone)."""
        import docker

        if c.docker_id is None:
            return None
        try:
            state: dict[str, Any] = self._api.inspect_container(c.docker_id)["State"]
        except docker.errors.NotFound:
            return None
        return state

    def _exit_code(self, c: _ContainerRun) -> int | None:
        state = self._inspect(c)
        return None if state is None else int(state.get("ExitCode", 0))

    def _pod_ips(self, run: _PodRun) -> tuple[str, ...]:
        """The main container's addresses, primary family first (read from Docker if it
        started a moment ago)."""
        with run.lock:
            ips = run.ips
            main_id = next((c.docker_id for c in run.containers if not c.init), None)
        if not ips and main_id is not None:
            ips = self._ips_of(main_id)
        return ips

    def _ips_of(self, docker_id: str) -> tuple[str, ...]:
        """A container's addresses on the pod network: IPv4 (and IPv6 first, with ``ipv6``)."""
        import docker

        try:
            info = self._api.inspect_container(docker_id)
        except docker.errors.NotFound:
            return ()
        network = ((info.get("NetworkSettings") or {}).get("Networks") or {}).get(self.network) or {}
        v4, v6 = str(network.get("IPAddress") or ""), str(network.get("GlobalIPv6Address") or "")
        if self.ipv6:  # no IP until the primary (IPv6) one is known: never an IPv4 podIP instead
            return (v6, *([v4] if v4 else [])) if v6 else ()
        return (v4,) if v4 else ()

    def _running(self, run: _PodRun) -> list[_ContainerRun]:
        return [c for c in run.containers if (self._inspect(c) or {}).get("Status") == "running"]

    def _docker_runtime(self, spec: Mapping[str, Any]) -> str | None:
        name = spec.get("runtimeClassName")
        if not name:
            return None
        runtime = self._runtime_handlers.get(str(name))
        if runtime is None:
            raise _PodFailure(
                "FailedCreatePodSandBox",
                f'Failed to create pod sandbox: no runtime for RuntimeClass "{name}" is configured '
                "(the stand-in's DockerPods has no Docker runtime for it)",
                pod_reason="RuntimeClassUnavailable",
            )
        return runtime

    # -- status ----------------------------------------------------------------------

    def _status_of(self, run: _PodRun) -> dict[str, Any]:
        at = run.start_time
        status: dict[str, Any] = {"qosClass": qos_class(run.pod)}
        ips = self._pod_ips(run)
        with run.lock:
            unschedulable, failure = run.unschedulable, run.failure
            snapshot = [(c, c.waiting, c.docker_id) for c in run.containers]
            sandbox_ready = run.sandbox_ready
        if unschedulable is not None:
            status["phase"] = "Pending"
            status["conditions"] = [condition("PodScheduled", False, at, "Unschedulable", unschedulable)]
            return status
        if self._host_ip:
            status.update(hostIP=self._host_ip, hostIPs=[{"ip": self._host_ip}])
        status["startTime"] = at
        states = [(c, self._state(c, waiting, docker_id)) for c, waiting, docker_id in snapshot]
        inits = [(c, s) for c, s in states if c.init]
        apps = [(c, s) for c, s in states if not c.init]
        initialized = all(_exit_of(s) == 0 for _, s in inits)
        ended = [_exit_of(s) for _, s in apps]
        if failure is not None or any(code not in (None, 0) for code in (_exit_of(s) for _, s in inits)):
            phase = "Failed"
        elif apps and all(code is not None for code in ended):
            phase = "Succeeded" if all(code == 0 for code in ended) else "Failed"
        elif any("running" in s for _, s in apps):
            phase = "Running"
        else:
            phase = "Pending"
        status["phase"] = phase
        if ips:
            status.update(podIP=ips[0], podIPs=[{"ip": ip} for ip in ips])
        unready = [c.name for c, s in apps if "running" not in s]
        done = phase in ("Succeeded", "Failed")
        ready_reason = None if not unready else ("PodCompleted" if done else "ContainersNotReady")
        ready_message = (
            None if not unready or done else f"containers with unready status: [{' '.join(unready)}]"
        )
        status["conditions"] = [
            condition("PodReadyToStartContainers", sandbox_ready, at),
            condition("Initialized", initialized, at, None if initialized else "ContainersNotInitialized"),
            condition("Ready", not unready, at, ready_reason, ready_message),
            condition("ContainersReady", not unready, at, ready_reason, ready_message),
            condition("PodScheduled", True, at),
        ]
        if inits:
            status["initContainerStatuses"] = [_container_status(c, s, init=True) for c, s in inits]
        status["containerStatuses"] = [_container_status(c, s, init=False) for c, s in apps]
        if failure is not None:
            reason, message = failure
            if reason:
                status["reason"] = reason
            status["message"] = message
        return status

    def _state(self, c: _ContainerRun, waiting: tuple[str, str], docker_id: str | None) -> dict[str, Any]:
        """The container's ``state`` (with the ``containerID`` and ``imageID`` it runs as)."""
        import docker

        if docker_id is None:
            return _waiting(*waiting)
        try:
            info = self._api.inspect_container(docker_id)
        except docker.errors.NotFound:
            return {
                "terminated": {
                    "exitCode": 137,
                    "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was terminated",
                }
            }
        state = info["State"]
        ids = {"containerID": f"docker://{docker_id}", "imageID": f"docker://{info.get('Image', '')}"}
        started, finished = _time(state.get("StartedAt")), _time(state.get("FinishedAt"))
        if state.get("Status") in ("running", "paused", "restarting"):
            return {"running": {"startedAt": started}, **ids}
        if state.get("Status") == "created":
            if not state.get("Error"):
                return _waiting("ContainerCreating", "")
            terminated = {"exitCode": int(state.get("ExitCode") or 128), "reason": "StartError"}
            return {"terminated": {**terminated, "message": str(state["Error"])}, **ids}
        code = int(state.get("ExitCode", 0))
        reason = "OOMKilled" if state.get("OOMKilled") else ("Completed" if code == 0 else "Error")
        terminated = {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": finished}
        return {"terminated": {**terminated, "containerID": ids["containerID"]}, **ids}

    # -- small helpers ---------------------------------------------------------------

    def _labels(self, run: _PodRun) -> dict[str, str]:
        return {
            LABEL_POD: run.uid,
            LABEL_RUNTIME: self.id,
            "io.kubernetes.pod.name": run.name,
            "io.kubernetes.pod.namespace": run.namespace,
        }

    def _report(self, run: _PodRun, kind: str, reason: str, message: str) -> None:
        """Record an Event once (a repeated retry records nothing new)."""
        key = (kind, reason, message)
        with run.lock:
            if key in run.reported:
                return
            run.reported.add(key)
        run.event(kind, reason, message)

    def _run_of(self, pod: dict[str, Any]) -> _PodRun | None:
        with self._lock:
            return self._runs.get(str(pod["metadata"].get("uid")))

    def _docker_id(self, pod: dict[str, Any], container: str) -> str | None:
        run = self._run_of(pod)
        if run is None:
            return None
        with run.lock:
            return next((c.docker_id for c in run.containers if c.name == container), None)

    def _remove_labelled(self, label: str) -> None:
        """Remove every container, then every volume, carrying ``label``."""
        import docker

        for container in self._client.containers.list(all=True, filters={"label": label}):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
        for volume in self._client.volumes.list(filters={"label": label}):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)


# --- pod spec to Docker ------------------------------------------------------------------


def _unschedulable(spec: Mapping[str, Any]) -> str | None:
    """The scheduler's message when the pod asks for a resource the stand-in node lacks."""
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = c.get("resources") or {}
        for amounts in (resources.get("requests") or {}, resources.get("limits") or {}):
            for name in amounts:
                if name not in _NODE_RESOURCES and not str(name).startswith("hugepages-"):
                    return f"0/1 nodes are available: 1 Insufficient {name}."
    return None


def _check_supported(spec: Mapping[str, Any]) -> None:
    """Raise :class:`_PodFailure` for what the stand-in cannot run faithfully."""
    for volume in spec.get("volumes") or []:
        kinds = [k for k in volume if k != "name"]
        kind = kinds[0] if kinds else "(none)"
        if kind not in _SUPPORTED_VOLUMES:
            raise _PodFailure(
                "FailedMount",
                f'MountVolume.SetUp failed for volume "{volume.get("name")}" : {kind} volumes are not '
                "supported by the stand-in (it runs emptyDir and secret volumes)",
                pod_reason="UnsupportedVolume",
            )
        medium = (volume.get("emptyDir") or {}).get("medium") or ""
        if kind == "emptyDir" and medium not in ("", "Memory"):
            raise _PodFailure(
                "FailedMount",
                f'MountVolume.SetUp failed for volume "{volume["name"]}" : emptyDir medium {medium!r} '
                "is not supported by the stand-in",
                pod_reason="UnsupportedVolume",
            )
    for key in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"):
        if spec.get(key):
            raise _PodFailure(
                "FailedCreatePodSandBox", f"{key}: true is not supported by the stand-in", "Unsupported"
            )
    seccomp = (_pod_security(spec).get("seccompProfile") or {}).get("type")
    if seccomp == "Localhost":
        raise _PodFailure(
            "FailedCreatePodSandBox",
            "a Localhost seccomp profile is not supported by the stand-in",
            "Unsupported",
        )


def _pod_security(spec: Mapping[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = spec.get("securityContext") or {}
    return context


def _container_security(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's effective securityContext: its own settings over the pod's."""
    pod = _pod_security(pod_spec)
    inherited = ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile")
    merged: dict[str, Any] = {k: pod[k] for k in inherited if k in pod}
    merged.update(container.get("securityContext") or {})
    return merged


def _docker_user(security: Mapping[str, Any], image_user: str) -> str | None:
    """``uid[:gid]`` for Docker (None: the image's user)."""
    uid, gid = security.get("runAsUser"), security.get("runAsGroup")
    if uid is None and gid is None:
        return None
    user = str(uid) if uid is not None else (image_user.split(":")[0] or "0")
    return user if gid is None else f"{user}:{gid}"


def _check_non_root(security: Mapping[str, Any], image_user: str, container: str) -> None:
    """The kubelet's runAsNonRoot verification (CreateContainerConfigError when it fails)."""
    if not security.get("runAsNonRoot"):
        return
    uid = security.get("runAsUser")
    if uid is None:
        user = image_user.split(":")[0] or "0"
        if not user.isdigit():
            raise _config_error(
                f"container has runAsNonRoot and image has non-numeric user ({user}), "
                f"cannot verify user is non-root (container: {container})"
            )
        uid = int(user)
    if int(uid) == 0:
        raise _config_error(f"container has runAsNonRoot and image will run as root (container: {container})")


def _security_opt(security: Mapping[str, Any]) -> list[str]:
    options = []
    if security.get("allowPrivilegeEscalation") is False:
        options.append("no-new-privileges:true")
    if (security.get("seccompProfile") or {}).get("type") == "Unconfined":
        options.append("seccomp=unconfined")
    return options


def _groups(pod_spec: Mapping[str, Any]) -> list[str]:
    """Supplementary groups: ``fsGroup`` and ``supplementalGroups``."""
    security = _pod_security(pod_spec)
    groups = [security["fsGroup"]] if security.get("fsGroup") is not None else []
    groups += list(security.get("supplementalGroups") or [])
    return [str(g) for g in dict.fromkeys(groups)]


def _dns(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    """``dnsPolicy: None`` with its ``dnsConfig`` as Docker's resolver settings. There is no
    cluster DNS here: every other policy gets a resolver of nothing (``127.0.0.1`` in the
    pod's own namespace), so a name other than a pod's container name fails in about a second
    and no query ever leaves this machine (Docker's resolver would forward it upstream)."""
    if pod_spec.get("dnsPolicy") != "None":
        return {"dns": ["127.0.0.1"], "dns_opt": ["timeout:1", "attempts:1"]}
    config = pod_spec.get("dnsConfig") or {}
    dns: dict[str, Any] = {}
    if config.get("nameservers"):
        dns["dns"] = list(config["nameservers"])
    if config.get("searches"):
        dns["dns_search"] = list(config["searches"])
    if config.get("options"):
        dns["dns_opt"] = [
            f"{o['name']}:{o['value']}" if o.get("value") is not None else str(o["name"])
            for o in config["options"]
        ]
    return dns


def _environment(run: _PodRun, spec: Mapping[str, Any]) -> dict[str, str]:
    """The container's environment: ``envFrom`` Secrets, then ``env`` (values, secretKeyRef, fieldRef)."""
    values: dict[str, str] = {}
    for source in spec.get("envFrom") or []:
        ref = source.get("secretRef")
        if ref is None:
            raise _PodFailure("Failed", "envFrom supports secretRef only in the stand-in", "Unsupported")
        data = run.secrets(str(ref["name"]))
        if data is None:
            if ref.get("optional"):
                continue
            raise _config_error(f'secret "{ref["name"]}" not found')
        for key, raw in data.items():
            values[f"{source.get('prefix', '')}{key}"] = _text(raw)
    for var in spec.get("env") or []:
        name = str(var["name"])
        if "valueFrom" in var:
            found = _value_from(run, var["valueFrom"])
            if found is not None:
                values[name] = found
        else:
            values[name] = _expand(str(var.get("value", "")), values)
    return values


_FIELDS: dict[str, Callable[[_PodRun], str]] = {
    "metadata.name": lambda run: run.name,
    "metadata.namespace": lambda run: run.namespace,
    "metadata.uid": lambda run: run.uid,
    "spec.nodeName": lambda run: _NODE,
    "spec.serviceAccountName": lambda run: str(run.spec.get("serviceAccountName") or "default"),
}


def _value_from(run: _PodRun, source: Mapping[str, Any]) -> str | None:
    """An ``env[].valueFrom`` (None: an optional Secret or key that is missing)."""
    ref = source.get("secretKeyRef")
    if ref is not None:
        name, key = str(ref["name"]), str(ref["key"])
        data = run.secrets(name)
        if data is None:
            if ref.get("optional"):
                return None
            raise _config_error(f'secret "{name}" not found')
        if key not in data:
            if ref.get("optional"):
                return None
            raise _config_error(f"couldn't find key {key} in Secret {run.namespace}/{name}")
        return _text(data[key])
    path = str((source.get("fieldRef") or {}).get("fieldPath", ""))
    if path in _FIELDS:
        return _FIELDS[path](run)
    labelled = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if labelled:
        return str((run.pod["metadata"].get(labelled[1]) or {}).get(labelled[2], ""))
    kind = path or next(iter(source), "(none)")
    raise _PodFailure("Failed", f"env valueFrom {kind} is not supported by the stand-in", "Unsupported")


def _mounts(run: _PodRun, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``docker.types.Mount`` arguments for the container's ``volumeMounts``."""
    mounts = []
    for m in spec.get("volumeMounts") or []:
        volume = run.volumes.get(str(m["name"]))
        if volume is None:
            raise _PodFailure("Failed", f'volumeMount "{m["name"]}" names no volume of the pod', "Invalid")
        sub = str(m.get("subPath") or "")
        target = str(m["mountPath"])
        if volume.kind == "bind":  # a secret: always read-only, as the kubelet mounts it
            source = Path(volume.source)
            if sub:
                source = _inside(source, sub)
                if not source.exists():
                    raise _config_error(
                        f'failed to prepare subPath for volumeMount "{m["name"]}": {sub} not found'
                    )
            mounts.append({"target": target, "source": str(source), "type": "bind", "read_only": True})
        else:
            if sub:
                raise _PodFailure(
                    "Failed", "subPath on an emptyDir is not supported by the stand-in", "Unsupported"
                )
            read_only = bool(m.get("readOnly"))
            mounts.append(
                {
                    "target": target,
                    "source": volume.source,
                    "type": "volume",
                    "read_only": read_only,
                    "no_copy": True,
                }
            )
    return mounts


def _write_secret_volume(run: _PodRun, name: str, source: Mapping[str, Any], fs_group: int | None) -> Path:
    """The secret volume's files in a host directory; :class:`_Waiting` while its Secret or a key is missing.

    Modes: each item's ``mode``, else ``defaultMode``, else 0644. With an fsGroup, the
    kubelet's ownership handling: files and directories owned ``0:<fsGroup>``, files made
    group-readable, directories group-readable, -searchable and setgid.
    """
    secret = str(source.get("secretName", ""))
    optional = bool(source.get("optional"))
    data = run.secrets(secret)
    if data is None and not optional:
        message = f'MountVolume.SetUp failed for volume "{name}" : secret "{secret}" not found'
        raise _Waiting("ContainerCreating", "", [("Warning", "FailedMount", message)])
    data = data or {}
    default_mode = int(source.get("defaultMode", 0o644))
    items = source.get("items")
    files: list[tuple[str, bytes, int]] = []
    for item in items if items is not None else [{"key": k, "path": k} for k in data]:
        key = str(item["key"])
        if key not in data:
            if optional:
                continue
            message = (
                f'MountVolume.SetUp failed for volume "{name}" : references non-existent secret key: {key}'
            )
            raise _Waiting("ContainerCreating", "", [("Warning", "FailedMount", message)])
        files.append((str(item["path"]), data[key], int(item.get("mode", default_mode))))
    root = run.workdir / f"secret-{name}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    directories = {root}
    for path, value, mode in files:
        target = _inside(root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        directories.update(p for p in target.parents if p.is_relative_to(root))
        target.write_bytes(value)
        if fs_group is not None:
            os.chown(target, 0, int(fs_group))
            mode |= 0o440
        os.chmod(target, mode)
    for directory in directories:
        if fs_group is not None:
            os.chown(directory, 0, int(fs_group))
            os.chmod(directory, 0o755 | 0o550 | stat.S_ISGID)
        else:
            os.chmod(directory, 0o755)
    return root


def _mount_tmpfs(path: Path, options: str) -> None:
    """Mount a tmpfs on ``path`` (this needs root, as the kubelet does)."""
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise _PodFailure(
            "FailedMount",
            f"MountVolume.SetUp failed for volume {path.name.removeprefix('empty-')!r} : "
            f"mounting a tmpfs failed: {done.stderr.strip() or done.returncode}",
        )


def _unmount_under(root: Path) -> None:
    """Unmount every mount at or under ``root`` (deepest first)."""
    prefix = str(root)
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1] for line in mounts if line.strip()]
    for point in sorted(
        (p for p in points if p == prefix or p.startswith(prefix + "/")), key=len, reverse=True
    ):
        subprocess.run(["umount", point], capture_output=True, check=False)


def _inside(root: Path, relative: str) -> Path:
    """``root/relative``, refusing an absolute path or one that climbs out."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        raise _PodFailure("Failed", f"invalid path {relative!r}: must be relative, without '..'", "Invalid")
    return root.joinpath(*parts)


def _memory_limit(spec: Mapping[str, Any]) -> int | None:
    memory = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return None if memory is None else _bytes(memory)


# --- values ------------------------------------------------------------------------------

_SUFFIXES: dict[str, Decimal] = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?")


def _quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity (``250m``, ``16Mi``, ``1e3``, ``536870912``) as a number."""
    match = _QUANTITY.fullmatch(str(value).strip())
    if match is None:
        raise _PodFailure("Failed", f"invalid quantity {value!r}", "Invalid")
    return Decimal(match[1]) * _SUFFIXES[match[2] or ""]


def _bytes(value: str | int | float) -> int:
    return int(_quantity(value).to_integral_value(rounding="ROUND_CEILING"))


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined variable's value; ``$$`` is a literal ``$``."""

    def replace(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        return env.get(match[1], match[0])

    return _REFERENCE.sub(replace, text)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(docker_time: str | None) -> str | None:
    """Docker's nanosecond RFC 3339 time as the API's (seconds); None for Docker's zero time."""
    if not docker_time or docker_time.startswith("0001-"):
        return None
    return f"{docker_time[:19]}Z"


def _explain(error: Exception) -> str:
    return str(getattr(error, "explanation", None) or error)


def _waiting(reason: str, message: str) -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def _exit_of(state: Mapping[str, Any]) -> int | None:
    terminated = state.get("terminated")
    return None if terminated is None else int(terminated["exitCode"])


def _container_status(c: _ContainerRun, state: dict[str, Any], *, init: bool) -> dict[str, Any]:
    state = dict(state)
    container_id = state.pop("containerID", None)
    image_id = state.pop("imageID", "")
    running = "running" in state
    status: dict[str, Any] = {
        "name": c.name,
        "image": str(c.spec.get("image", "")),
        "imageID": image_id,
        "ready": running or (init and _exit_of(state) == 0),
        "restartCount": 0,
        "started": running,
        "state": state,
        "lastState": {},
    }
    if container_id:
        status["containerID"] = container_id
    return status


def _pumped(stream: Any) -> Iterator[bytes]:
    """A Docker log stream's chunks, with an empty chunk (a heartbeat) every tick nothing comes."""
    chunks: queue.Queue[bytes | None] = queue.Queue()

    def pump() -> None:
        try:
            for chunk in stream:
                chunks.put(chunk)
        except (OSError, ValueError):  # the stream was closed under the reader
            pass
        finally:
            chunks.put(None)

    threading.Thread(target=pump, name="pod-log", daemon=True).start()
    try:
        while True:
            try:
                chunk = chunks.get(timeout=_FOLLOW_TICK_S)
            except queue.Empty:
                yield b""
                continue
            if chunk is None:
                return
            yield chunk
    finally:
        stream.close()

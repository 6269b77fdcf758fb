"""Playing the kubelet for the stand-in API server's scripted pods, without Docker.

:class:`RunnerPods` watches the stand-in for the Kubernetes backend's pods and, for each
sandbox pod, starts a real runner process on this host with the token from the pod's Secret
(what the kubelet would mount), exposed as the pod's runner port for port-forward. A proxy
pod gets the log lines a test gives it (by default just the bundle's ready line).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airlock.sandbox.kubernetes._enforcement_result import EnforcementResult, EnforcementStatus
from airlock.sandbox.kubernetes._guard import EnforcementGuard
from airlock.sandbox.kubernetes._names import LABEL_ROLE, RUNNER_PORT
from airlock.sandbox.kubernetes._proxy_log import READY_LINE
from airlock.sandbox.kubernetes._runner_tls import RunnerCertificate
from airlock.testing import DockerPods, KubeApiStandIn, ScriptedPods

__all__ = ["RunnerPods", "docker_pod_network", "free_port", "recorded_guard", "until"]


async def until(condition: Callable[[], object], timeout: float = 20.0) -> None:  # noqa: ASYNC109
    """Wait until ``condition()`` is true (polled every 10 ms).

    Raises:
        TimeoutError: not within ``timeout`` seconds.
    """
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - the condition is another thread's state
            await asyncio.sleep(0.01)


def recorded_guard(namespace: str, status: EnforcementStatus = "enforced") -> EnforcementGuard:
    """A guard whose every proof returns a recorded result of ``status`` (the stand-in enforces
    no NetworkPolicy, so a flow test that is about something else runs on a recorded proof)."""

    async def prove() -> EnforcementResult:
        return EnforcementResult(
            status=status, namespace=namespace, checked_at=datetime.now(UTC), reason="recorded for a test"
        )

    return EnforcementGuard(namespace=namespace, mode="verify", interval_s=600.0, prove=prove)


@contextlib.contextmanager
def docker_pod_network() -> Iterator[tuple[DockerPods, str]]:
    """Pods run on the local Docker engine, and the pod network's gateway (this machine's
    address on the bridge the runtime created: where a test's own servers listen)."""
    import docker

    runtime = DockerPods()
    try:
        network = docker.from_env().networks.get(runtime.network)
        yield runtime, str(network.attrs["IPAM"]["Config"][0]["Gateway"])
    finally:
        runtime.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` (a loopback address) right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class RunnerPods:
    """Runner processes for the stand-in's sandbox pods (an async context manager).

    Args:
        api: the stand-in; ``pods``: its ScriptedPods; ``namespace``: where sandboxes live.
        work: a directory for the runners' token files and workspaces.
        proxy_log: the log of each proxy pod (default: the bundle's ready line).
        runner: whether sandbox pods get a runner (False: they run but never answer).
        host: where the runners listen (``::1`` for a pod IP of ``::1``); port-forwards reach
            them on 127.0.0.1, so keep the default with ``connect: port_forward``.
        port: the runners' port (None: a free one per runner).
        certificate: what every runner serves with instead of its Secret's certificate (a
            runner impersonating its sandbox's).
    """

    def __init__(
        self,
        api: KubeApiStandIn,
        pods: ScriptedPods,
        namespace: str,
        work: Path,
        *,
        proxy_log: Callable[[dict[str, Any]], str] | None = None,
        runner: bool = True,
        host: str = "127.0.0.1",
        port: int | None = None,
        certificate: RunnerCertificate | None = None,
    ) -> None:
        self.api = api
        self.certificate = certificate
        self.pods = pods
        self.namespace = namespace
        self.work = work
        self.proxy_log = proxy_log or (lambda pod: READY_LINE + "\n")
        self.runner = runner
        self.host = host
        self.port = port
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.seen: dict[str, dict[str, Any]] = {}
        #: Each sandbox pod's runner's port on this host.
        self.ports: dict[str, int] = {}
        #: Each seen pod's IP, as its status showed when it was first seen.
        self.ips: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RunnerPods:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.to_thread(proc.wait)

    async def _watch(self) -> None:
        while True:
            for pod in self.api.objects("pods", self.namespace):
                name = pod["metadata"]["name"]
                if name not in self.seen:
                    self.seen[name] = pod
                    self.ips[name] = str(self.pods.status(pod).get("podIP") or "")
                    await asyncio.to_thread(self._play, pod)
            await asyncio.sleep(0.02)

    def _play(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        role = pod["metadata"]["labels"].get(LABEL_ROLE)
        if role == "proxy":
            self.pods.set_logs(self.namespace, name, "proxy", self.proxy_log(pod))
            return
        if not self.runner or pod["spec"]["containers"][0]["name"] != "runner":
            return  # an enforcement proof's pod (its prober has a sandbox's labels) runs no runner
        secret = self.api.get("secrets", self.namespace, name)
        assert secret is not None, f"pod {name} was created before its Secret"
        token = base64.b64decode(secret["data"]["token"]).decode()
        root = self.work / name
        (root / "workspace").mkdir(parents=True)
        token_file = root / "token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        port = self.port or free_port(self.host)
        listen = f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"
        tls = self._tls_files(secret, root)
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "airlock.runner", "--listen", listen, "--token-file",
             str(token_file), "--token-file-delete", "--workspace", str(root / "workspace"), *tls],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.ports[name] = port
        self.pods.expose(self.namespace, name, RUNNER_PORT, port)

    def _tls_files(self, secret: dict[str, Any], root: Path) -> list[str]:
        """``--tls-cert/--tls-key`` from the Secret, as the pod mounts them (or the stand-in's
        ``certificate`` instead: a runner presenting another certificate than its sandbox's); none
        for a hand-made Secret without them (a plaintext runner)."""
        if "tls.crt" not in (secret.get("data") or {}) and self.certificate is None:
            return []
        files = {key: base64.b64decode(secret["data"][key]) for key in ("tls.crt", "tls.key")}
        if self.certificate is not None:
            files = {"tls.crt": self.certificate.cert_pem, "tls.key": self.certificate.key_pem}
        for key, data in files.items():
            (root / key).write_bytes(data)
        return ["--tls-cert", str(root / "tls.crt"), "--tls-key", str(root / "tls.key")]

    def kill_runner(self, name: str) -> None:
        """The runner of pod ``name`` dies (as its container would)."""
        self.processes[name].kill()

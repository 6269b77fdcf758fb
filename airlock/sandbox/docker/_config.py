"""EnvironmentSpec → Docker container settings, as pure functions (tested without Docker).

The policy arrives compiled (``SandboxRequest.plan``); limits are
:func:`~airlock.sandbox._limits.resolve_limits`'s. :func:`resolve_boundary` maps the
requested isolation to an engine runtime and refuses a runtime the engine lacks — never
falling back to a weaker boundary.
:func:`container_config` renders the hardened ``containers.create`` keyword arguments.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from airlock.policy.resources import tmpfs_size
from airlock.sandbox._isolation import requested_isolation
from airlock.sandbox._limits import Limits
from layer0 import EnvError, EnvironmentSpec

#: Inside the sandbox: the control directory (the only host path), the runner's socket and
#: token file, the workspace.
CONTROL_DIR = "/run/airlock"
SOCKET_NAME = "runner.sock"
TOKEN_NAME = "token"
WORKSPACE = "/workspace"
GVISOR_RUNTIMES = ("runsc",)
KATA_RUNTIMES = ("kata", "kata-runtime", "io.containerd.kata.v2", "kata-qemu", "kata-clh", "kata-fc")
GPU_RUNTIMES = ("nvidia",)


@dataclass(frozen=True)
class Boundary:
    """The resolved isolation: which OCI runtime runs the sandbox, and from which image."""

    kind: str  # "container" | "gvisor" | "micro_vm"
    runtime: str
    image: str | None = None


def resolve_boundary(spec: EnvironmentSpec, runtimes: Collection[str]) -> Boundary:
    """Map ``spec.isolation`` to a runtime the engine has.

    Raises:
        EnvError: ``isolation_violation`` for process-only, wasm, unknown custom, conflicting
            boundaries (gvisor + micro_vm), or a runtime the engine lacks (named).
    """
    asked = requested_isolation(spec, "docker")
    available = set(runtimes)
    if asked.kind == "gvisor":
        runtime = _first(GVISOR_RUNTIMES, available)
        if runtime is None:
            raise EnvError.isolation_violation(
                "gvisor isolation needs the Docker runtime 'runsc' (gVisor), which this engine does not "
                f"have (runtimes: {', '.join(sorted(available)) or 'none'}); install gVisor and register "
                "runsc in /etc/docker/daemon.json — airlock never falls back to a weaker boundary"
            )
        return Boundary("gvisor", runtime, asked.image)
    if asked.kind == "micro_vm":
        runtime = _first(KATA_RUNTIMES, available)
        if runtime is None:
            raise EnvError.isolation_violation(
                "micro_vm isolation needs a Kata Containers runtime (one of "
                f"{', '.join(KATA_RUNTIMES)}), which this engine does not have (runtimes: "
                f"{', '.join(sorted(available)) or 'none'}) — airlock never falls back to a weaker boundary"
            )
        return Boundary("micro_vm", runtime, asked.image)
    return Boundary("container", "runc", asked.image)


def _first(names: tuple[str, ...], available: set[str]) -> str | None:
    return next((n for n in names if n in available), None)


def runner_command() -> list[str]:
    """Arguments to the image's entrypoint (``python -m airlock.runner``)."""
    return [
        "--listen",
        f"unix:{CONTROL_DIR}/{SOCKET_NAME}",
        "--token-file",
        f"{CONTROL_DIR}/{TOKEN_NAME}",
        "--token-file-delete",
        "--workspace",
        WORKSPACE,
    ]


def container_config(
    *,
    image: str,
    sandbox_id: str,
    control_dir: str,
    labels: dict[str, str],
    boundary: Boundary,
    limits: Limits,
    runtimes: Collection[str],
    user: tuple[int, int] = (65534, 65534),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``DockerClient.containers.create``: the hardened sandbox.

    No network, a non-root user, read-only root with tmpfs workspace and /tmp, all
    capabilities dropped, no-new-privileges, the engine's default seccomp profile (never
    unconfined), pid/memory(+swap)/CPU limits, never privileged, an init as PID 1, and one
    bind mount: ``control_dir`` at /run/airlock.

    ``extra`` (from :meth:`~._egress.EgressWiring.sandbox_settings`) adds environment
    variables, read-only credential file mounts, and ``network``/``dns`` (the internal
    network instead of none); it can never override the hardening.

    Raises:
        EnvError: ``resource_exceeded`` when GPUs are asked for and the engine has no GPU
            runtime.
    """
    uid, gid = user
    config: dict[str, Any] = {
        "image": image,
        "command": runner_command(),
        "name": f"airlock-{sandbox_id}",
        "hostname": "sandbox",
        "user": f"{uid}:{gid}",
        "labels": dict(labels),
        "detach": True,
        "init": True,
        "runtime": boundary.runtime,
        "network_mode": "none",
        "read_only": True,
        "privileged": False,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "pids_limit": limits.pids,
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": limits.nano_cpus,
        "ipc_mode": "private",
        "tmpfs": {
            WORKSPACE: (
                f"rw,nosuid,nodev,exec,size={tmpfs_size(limits.disk_bytes)},mode=0700,uid={uid},gid={gid}"
            ),
            "/tmp": f"rw,nosuid,nodev,noexec,size={tmpfs_size(limits.tmp_bytes)},mode=1777",
        },
        "volumes": {control_dir: {"bind": CONTROL_DIR, "mode": "rw"}},
        "environment": {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
        "log_config": {"type": "json-file", "config": {"max-size": "1m", "max-file": "1"}},
    }
    if extra:
        config["environment"].update(extra.get("environment") or {})
        config["volumes"].update(extra.get("volumes") or {})
        if extra.get("network"):
            del config["network_mode"]
            config["network"] = extra["network"]
            config["dns"] = list(extra.get("dns") or [])
            config["dns_opt"] = list(extra.get("dns_opt") or [])
    if limits.gpus is not None:
        if not any(r in runtimes for r in GPU_RUNTIMES):
            raise EnvError.resource_exceeded(
                f"gpu: the spec asks for {'all' if limits.gpus == -1 else limits.gpus} GPU(s) but the Docker "
                "engine has no GPU runtime (nvidia-container-toolkit, runtime 'nvidia')"
            )
        config["device_requests"] = [{"count": limits.gpus, "capabilities": [["gpu"]]}]
    return config

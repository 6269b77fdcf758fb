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

from ._settings import GVISOR_ARGS, GVISOR_NETWORKED_ARGS, DockerRuntimes

#: Inside the sandbox: the control directory (the only host path), the runner's socket and
#: token file, the workspace.
CONTROL_DIR = "/run/airlock"
SOCKET_NAME = "runner.sock"
TOKEN_NAME = "token"
WORKSPACE = "/workspace"
GPU_RUNTIMES = ("nvidia",)


@dataclass(frozen=True)
class Boundary:
    """The resolved isolation: which OCI runtime runs the sandbox, and from which image.

    ``init``: Docker's init is PID 1 and the runner its child. gVisor (release 20221219)
    grants the child-subreaper role only to PID 1, so there the runner itself is PID 1:
    every orphan of a tool is then re-parented to the runner, which sweeps it.
    """

    kind: str  # "container" | "gvisor" | "micro_vm"
    runtime: str
    image: str | None = None
    init: bool = True


def resolve_boundary(
    spec: EnvironmentSpec,
    runtimes: Collection[str],
    names: DockerRuntimes | None = None,
    *,
    networked: bool = False,
    floor: str = "container",
) -> Boundary:
    """Map ``spec.isolation`` to a runtime the engine has (``names``: which registered
    runtime provides which kind; ``networked``: the sandbox joins a network, which gVisor
    needs its own registration for; ``floor="gvisor"``: a plain container becomes gVisor).

    Raises:
        EnvError: ``isolation_violation`` for process-only, wasm, unknown custom, conflicting
            boundaries (gvisor + micro_vm), or a runtime the engine lacks (named).
    """
    names = names or DockerRuntimes()
    asked = requested_isolation(spec, "docker")
    available = set(runtimes)
    if asked.kind == "gvisor" or (asked.kind == "container" and floor == "gvisor"):
        runtime = names.gvisor_networked if networked else names.gvisor
        if runtime not in available:
            args = " ".join(GVISOR_NETWORKED_ARGS if networked else GVISOR_ARGS)
            raise EnvError.isolation_violation(
                f"gvisor isolation{' with network access' if networked else ''} needs the Docker runtime "
                f"{runtime!r} (gVisor's runsc with runtimeArgs {args}), which this engine does not have "
                f"(runtimes: {', '.join(sorted(available)) or 'none'}); install gVisor and register it in "
                "/etc/docker/daemon.json (airlock doctor prints the entry) — airlock never falls back to a "
                "weaker boundary"
            )
        return Boundary("gvisor", runtime, asked.image, init=False)
    if asked.kind == "micro_vm":
        kata = next((n for n in names.micro_vm if n in available), None)
        if kata is None:
            raise EnvError.isolation_violation(
                "micro_vm isolation needs a Kata Containers runtime (one of "
                f"{', '.join(names.micro_vm)}), which this engine does not have (runtimes: "
                f"{', '.join(sorted(available)) or 'none'}) — airlock never falls back to a weaker boundary"
            )
        return Boundary("micro_vm", kata, asked.image)
    return Boundary("container", "runc", asked.image)


def runner_command(preload: bool = False) -> list[str]:
    """Arguments to the image's entrypoint (``python -m airlock.runner``); ``preload``: import
    the turn's machinery once SERVING (a warm pool member, idle until its job)."""
    return [
        "--listen",
        f"unix:{CONTROL_DIR}/{SOCKET_NAME}",
        "--token-file",
        f"{CONTROL_DIR}/{TOKEN_NAME}",
        "--token-file-delete",
        "--workspace",
        WORKSPACE,
        *(["--preload"] if preload else []),
    ]


#: gVisor's host-side tasks: its kernel's threads (≈42 at rest) plus, on the ptrace platform,
#: about six per sleeping sandboxed process and up to ≈22 per process under repeated fork
#: bombs on an idle machine (measured with runsc 20221219: 4901 host tasks for 224 sandboxed
#: processes). The bound leaves room above that; past it (under load) the sandbox dies
#: outright, which is reported as the resource it is (:data:`GVISOR_KERNEL_DIED`).
GVISOR_HOST_PIDS_BASE = 64
GVISOR_HOST_PIDS_PER_PROCESS = 32


#: The exit code of a gVisor sandbox whose kernel (the sentry, a Go program) died of a fatal
#: error. On the ptrace platform its host threads grow with the sandboxed processes *and* with
#: the kernel's own threads that ran them, so under CPU contention many processes at once (a
#: fork bomb) can reach the host task cap before RLIMIT_NPROC stops them (measured here with
#: two busy cores: 8256 host tasks, the cap, for 256 processes); the kernel then cannot start
#: a thread and exits with Go's fatal-error code.
GVISOR_KERNEL_DIED = 2


def process_limits(boundary: Boundary, pids: int) -> dict[str, Any]:
    """The settings that cap the sandbox at ``pids`` processes.

    runc: the pids cgroup counts the sandbox's processes (``pids_limit``). gVisor: the
    cgroup counts the host threads of gVisor's own kernel instead, and a sandbox that
    exhausts it dies outright. There the sandboxed processes are capped by
    ``RLIMIT_NPROC``, which gVisor counts inside its own kernel (a fork past it fails with
    EAGAIN, as under runc), and the cgroup keeps a host-side bound with room for the kernel.
    ``RLIMIT_NPROC`` is never set for runc: the host kernel counts it per uid across every
    container of that uid.
    """
    if boundary.kind != "gvisor":
        return {"pids_limit": pids}
    return {
        "pids_limit": GVISOR_HOST_PIDS_BASE + GVISOR_HOST_PIDS_PER_PROCESS * pids,
        "ulimits": [{"Name": "nproc", "Soft": pids, "Hard": pids}],
    }


def _tmpfs(limits: Limits, uid: int, gid: int) -> dict[str, str]:
    """The writable places: the workspace (the sandbox user's, executable) and /tmp."""
    return {
        WORKSPACE: f"rw,nosuid,nodev,exec,size={tmpfs_size(limits.disk_bytes)},mode=0700,uid={uid},gid={gid}",
        "/tmp": f"rw,nosuid,nodev,noexec,size={tmpfs_size(limits.tmp_bytes)},mode=1777",
    }


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
    preload: bool = False,
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
        "command": runner_command(preload),
        "name": f"airlock-{sandbox_id}",
        "hostname": "sandbox",
        "user": f"{uid}:{gid}",
        "labels": dict(labels),
        "detach": True,
        "init": boundary.init,
        "runtime": boundary.runtime,
        "network_mode": "none",
        "read_only": True,
        "privileged": False,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        **process_limits(boundary, limits.pids),
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": limits.nano_cpus,
        "ipc_mode": "private",
        "tmpfs": _tmpfs(limits, uid, gid),
        "volumes": {control_dir: {"bind": CONTROL_DIR, "mode": "rw"}},
        "environment": {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
        "log_config": {"type": "json-file", "config": {"max-size": "1m", "max-file": "1"}},
    }
    if extra:
        _add_wiring(config, extra)
    if limits.gpus is not None:
        config["device_requests"] = _gpu_request(limits.gpus, runtimes)
    return config


def _add_wiring(config: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """The egress wiring's environment, credential mounts and network (never the hardening)."""
    config["environment"].update(extra.get("environment") or {})
    config["volumes"].update(extra.get("volumes") or {})
    if extra.get("network"):
        del config["network_mode"]
        config["network"] = extra["network"]
        config["dns"] = list(extra.get("dns") or [])
        config["dns_opt"] = list(extra.get("dns_opt") or [])


def _gpu_request(gpus: int, runtimes: Collection[str]) -> list[dict[str, Any]]:
    """The device request for ``gpus`` GPUs (-1: all), refused without a GPU runtime."""
    if not any(r in runtimes for r in GPU_RUNTIMES):
        raise EnvError.resource_exceeded(
            f"gpu: the spec asks for {'all' if gpus == -1 else gpus} GPU(s) but the Docker "
            "engine has no GPU runtime (nvidia-container-toolkit, runtime 'nvidia')"
        )
    return [{"count": gpus, "capabilities": [["gpu"]]}]

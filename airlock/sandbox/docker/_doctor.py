"""``airlock doctor``'s questions to the Docker backend: engine, runner image, runtimes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from airlock.images import LABEL_DIGEST, checkout_digest, docker_client, docker_errors, runner_image_tag
from airlock.sandbox._declaration import DoctorCheck
from airlock.sandbox._limits import SandboxDefaults

from ._config import GVISOR_HOST_PIDS_BASE, GVISOR_HOST_PIDS_PER_PROCESS
from ._settings import GVISOR_ARGS, GVISOR_NETWORKED_ARGS, DockerRuntimes, DockerSettings, daemon_json_text
from ._subnets import Claim, capacity, conflicts, docker_subnets, host_networks

__all__ = ["doctor_checks"]


async def doctor_checks(settings: DockerSettings | None = None) -> list[DoctorCheck]:
    """The engine answers; the runner image is built from these sources; gVisor and Kata
    runtimes are registered (absent is a warning: such agents are refused, never downgraded)."""
    return await asyncio.to_thread(_checks, settings or DockerSettings())


def _checks(settings: DockerSettings) -> list[DoctorCheck]:
    checks, client = _check_engine()
    if client is not None:
        try:
            checks.append(_check_image(client))
            checks.append(_check_subnets(client, settings))
            checks += _check_runtimes(client, settings)
        finally:
            client.close()
    return checks


def _check_engine() -> tuple[list[DoctorCheck], Any]:
    """The engine answers (and its version); returns the client for the next checks, or None."""
    try:
        client = docker_client(timeout=10)
        version = client.version()
    except Exception as e:
        return [
            DoctorCheck(
                "docker",
                "error",
                f"Docker engine unreachable: {e}",
                "start Docker (dockerd) or set DOCKER_HOST; the docker backend needs it",
            )
        ], None
    return [
        DoctorCheck(
            "docker",
            "ok",
            f"Docker engine {version.get('Version', '?')} reachable (API {version.get('ApiVersion', '?')})",
        )
    ], client


def _check_image(client: Any) -> DoctorCheck:
    """The runner image exists (and was built from these sources)."""
    tag = runner_image_tag()
    errors = docker_errors()
    try:
        image = client.images.get(tag)
    except errors.ImageNotFound:
        return DoctorCheck("image", "error", f"runner image {tag} is missing", "run: airlock images build")
    except errors.DockerException as e:
        return DoctorCheck("image", "error", f"cannot inspect {tag}: {e}", "check the Docker engine")
    size = (image.attrs.get("Size") or 0) / 1e6
    found = f"runner image {tag} present ({image.id[:19]}, {size:.0f} MB)"
    label = (image.attrs.get("Config") or {}).get("Labels") or {}
    current = checkout_digest()
    if current is not None and label.get(LABEL_DIGEST) not in (None, current):
        return DoctorCheck(
            "image",
            "warning",
            found + ", but built from other sources than this checkout",
            "run: airlock images build",
        )
    return DoctorCheck("image", "ok", found)


def _check_subnets(client: Any, settings: DockerSettings, host: list[Claim] | None = None) -> DoctorCheck:
    """How many sandboxes with egress the internal range holds, and what else overlaps it
    (another Docker network, a host route or address: those subnets are skipped)."""
    pool, prefix = settings.internal_range, settings.internal_prefix
    try:
        subnets = docker_subnets(client)
    except docker_errors().DockerException as e:
        return DoctorCheck("subnets", "error", f"cannot list Docker networks: {e}", "check the Docker engine")
    host = host_networks() if host is None else host
    cap = capacity(pool, prefix, [s.network for s in subnets] + [c.network for c in host])
    ours = sum(1 for s in subnets if s.ours and s.network.subnet_of(pool))
    found = (
        f"internal networks: /{prefix} subnets of {pool} (backends.docker.internal_subnets): "
        f"{cap.total} in all, {cap.in_use} in use ({ours} by sandboxes), {cap.free} free"
    )
    clash = conflicts(pool, subnets, host)
    if clash:
        more = f" and {len(clash) - 5} more" if len(clash) > 5 else ""
        shown = ", ".join(c.what for c in clash[:5]) + more
        return DoctorCheck(
            "subnets",
            "warning",
            f"{found}; the range overlaps {shown} (those subnets are never used)",
            "set backends.docker.internal_subnets to a private range no host route or other network uses",
        )
    if not cap.free:
        return DoctorCheck(
            "subnets",
            "warning",
            f"{found}: a new sandbox with egress waits for one, then fails",
            "raise backends.docker.internal_subnets (or internal_prefix, up to 29) or lower concurrency",
        )
    return DoctorCheck("subnets", "ok", found)


def _check_runtimes(client: Any, settings: DockerSettings) -> list[DoctorCheck]:
    """gVisor (both registrations, with their arguments, and a real start) and Kata, from
    ``docker info``; an absent runtime is a warning (such agents are refused, never
    downgraded), a misregistered one an error."""
    try:
        info = client.info()
    except Exception as e:
        return [DoctorCheck("runtimes", "error", f"docker info failed: {e}", "check the Docker engine")]
    registered: dict[str, Any] = dict(info.get("Runtimes") or {})
    names = settings.runtimes
    out = [
        _check_gvisor(registered, names.gvisor, GVISOR_ARGS, "gvisor", names),
        _check_gvisor(registered, names.gvisor_networked, GVISOR_NETWORKED_ARGS, "gvisor-networked", names),
    ]
    if out[0].status == "ok":
        out.append(_check_gvisor_starts(client, names.gvisor))
        if (pids := _pid_max_check()) is not None:
            out.append(pids)
    kata = [r for r in names.micro_vm if r in registered]
    if kata:
        out.append(DoctorCheck("micro_vm", "ok", f"micro_vm isolation available (runtime {kata[0]})"))
    else:
        out.append(
            DoctorCheck(
                "micro_vm",
                "warning",
                "micro_vm isolation unavailable: no Kata Containers runtime registered "
                f"({', '.join(names.micro_vm)})",
                MICRO_VM_HINT + _kvm_note(),
            )
        )
    return out


def _pid_max_check(pid_max: str = "/proc/sys/kernel/pid_max") -> DoctorCheck | None:
    """gVisor's host tasks per sandbox, against the host's pid space (when visible from here)."""
    try:
        limit = int(Path(pid_max).read_text().strip())
    except (OSError, ValueError):
        return None
    worst = GVISOR_HOST_PIDS_BASE + GVISOR_HOST_PIDS_PER_PROCESS * SandboxDefaults().pids
    if limit >= 16 * worst:
        return DoctorCheck("gvisor-pids", "ok", f"host pid space {limit}: room for many gVisor sandboxes")
    return DoctorCheck(
        "gvisor-pids",
        "warning",
        f"host pid space is only {limit}: under a fork bomb one gVisor sandbox may take up to {worst} host "
        f"tasks (its cap), so {max(1, limit // worst)} such sandboxes could exhaust the host's pids",
        "raise it: sysctl -w kernel.pid_max=4194304",
    )


def _kvm_note(cpuinfo: str = "/proc/cpuinfo", kvm: str = "/dev/kvm") -> str:
    """Why a micro-VM runtime would not help on this host, when that is visible from here.

    A ``/dev/kvm`` without the CPU's ``vmx``/``svm`` flag is a paravirtual KVM (such as
    PVM inside a cloud VM): standard micro-VM guest kernels fail on it (libkrun's exits with
    ``KVM_EXIT_INTERNAL_ERROR`` before its agent comes up).
    """
    try:
        flags = set(Path(cpuinfo).read_text().split())
    except OSError:
        return ""
    if not Path(kvm).exists():
        return "; this host has no /dev/kvm"
    if not flags & {"vmx", "svm"}:
        return (
            "; this host's /dev/kvm has no hardware virtualization behind it (no vmx/svm CPU flag: a "
            "paravirtual KVM), where standard micro-VM guest kernels fail to boot"
        )
    return ""


#: What a user without Kata can do; what was found about other micro-VM runtimes is in the README.
MICRO_VM_HINT = (
    "install Kata Containers and register it with Docker (agents asking for micro_vm are refused, "
    "never downgraded); Debian packages neither Kata nor Firecracker — use gvisor for a stronger "
    "boundary here"
)


def _check_gvisor(
    registered: dict[str, Any], name: str, needed: tuple[str, ...], check: str, names: DockerRuntimes
) -> DoctorCheck:
    fix = (
        "install gVisor (apt-get install runsc) and add to /etc/docker/daemon.json, then restart "
        f"dockerd: {daemon_json_text(names)}"
    )
    what = "sandboxes with network access" if check == "gvisor-networked" else "sandboxes without network"
    entry = registered.get(name)
    if entry is None:
        return DoctorCheck(
            check,
            "warning",
            f"gvisor isolation for {what} unavailable: runtime {name!r} is not registered "
            "(agents asking for it are refused, never downgraded)",
            fix,
        )
    path = entry.get("path") or entry.get("Path") or "?"
    args = list(entry.get("runtimeArgs") or entry.get("RuntimeArgs") or [])
    missing = [a for a in needed if a not in args]
    if missing:
        return DoctorCheck(
            check,
            "error",
            f"runtime {name!r} ({path}) lacks the runtimeArgs {' '.join(missing)} "
            f"(has: {' '.join(args) or 'none'})",
            fix,
        )
    found = f"gvisor isolation for {what}: runtime {name!r} ({path} {' '.join(args)})"
    return DoctorCheck(check, "ok", found)


def _check_gvisor_starts(client: Any, runtime: str) -> DoctorCheck:
    """Start one throwaway container under gVisor: the kernel it reports is gVisor's."""
    errors = docker_errors()
    try:
        raw = client.containers.run(
            runner_image_tag(),
            entrypoint=["python3", "-c", "import os; print(os.uname().release)"],
            runtime=runtime,
            network_mode="none",
            user="65534:65534",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            remove=True,
            labels={"airlock.doctor": "gvisor"},
        )
    except errors.ImageNotFound:
        return DoctorCheck("gvisor-start", "warning", "not started under gVisor: the runner image is missing")
    except errors.DockerException as e:
        return DoctorCheck(
            "gvisor-start",
            "error",
            f"a container does not start under runtime {runtime!r}: {e}",
            "check runsc (runsc --version) and dockerd's log",
        )
    release = bytes(raw).decode(errors="replace").strip()
    return DoctorCheck("gvisor-start", "ok", f"a sandbox starts under gVisor (its kernel reports {release})")

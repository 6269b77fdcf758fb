"""The Pod Security Standards' ``restricted`` profile as a check on a pod manifest.

What the API server's PodSecurity admission enforces in a namespace labelled
``pod-security.kubernetes.io/enforce: restricted`` (the baseline checks plus the restricted
ones, as documented at kubernetes.io/docs/concepts/security/pod-security-standards), written
out so a rendered pod can be checked without a cluster. It returns every violation, empty
when admitted.
"""

from __future__ import annotations

from typing import Any

#: Volume types the restricted profile allows.
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
#: Capabilities baseline allows adding (restricted: only NET_BIND_SERVICE).
_SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Every way ``pod`` (a Pod manifest) breaks the ``restricted`` profile."""
    spec = pod["spec"]
    problems: list[str] = []
    pod_ctx = spec.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            problems.append(f"spec.{key} is true")
    if (pod_ctx.get("windowsOptions") or {}).get("hostProcess"):
        problems.append("hostProcess")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}: type {sorted(kinds - RESTRICTED_VOLUMES)} not allowed")
    for sysctl in pod_ctx.get("sysctls") or []:
        if sysctl.get("name") not in _SAFE_SYSCTLS:
            problems.append(f"sysctl {sysctl.get('name')} not allowed")
    if pod_ctx.get("runAsUser") == 0:
        problems.append("spec.securityContext.runAsUser is 0")
    selinux = pod_ctx.get("seLinuxOptions") or {}
    if selinux.get("user") or selinux.get("role"):
        problems.append("spec.securityContext.seLinuxOptions sets user/role")
    pod_seccomp = (pod_ctx.get("seccompProfile") or {}).get("type")
    containers = [
        *(("initContainers", c) for c in spec.get("initContainers") or []),
        *(("containers", c) for c in spec.get("containers") or []),
        *(("ephemeralContainers", c) for c in spec.get("ephemeralContainers") or []),
    ]
    for field, container in containers:
        where = f"{field}[{container['name']}]"
        ctx = container.get("securityContext") or {}
        if ctx.get("privileged"):
            problems.append(f"{where}: privileged")
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            problems.append(f"{where}: hostProcess")
        if any(p.get("hostPort") for p in container.get("ports") or []):
            problems.append(f"{where}: hostPort")
        if ctx.get("procMount") not in (None, "Default"):
            problems.append(f"{where}: procMount {ctx['procMount']}")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{where}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"{where}: adds capabilities {sorted(set(caps['add']) - {'NET_BIND_SERVICE'})}")
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            problems.append(f"{where}: runAsNonRoot is not true")
        if ctx.get("runAsUser") == 0:
            problems.append(f"{where}: runAsUser is 0")
        seccomp = (ctx.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: seccompProfile is {seccomp or 'unset'}")
        if (ctx.get("seLinuxOptions") or {}).get("user") or (ctx.get("seLinuxOptions") or {}).get("role"):
            problems.append(f"{where}: seLinuxOptions sets user/role")
    return problems

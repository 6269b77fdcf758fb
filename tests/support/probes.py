"""Scripts the tests run in a child process or inside a sandbox to see what it can reach."""

from __future__ import annotations

#: Python source. Tries every way a same-uid process has to read or steer process
#: ``argv[1]`` (without an argument: the runner, ``python -m airlock.runner``, found through
#: /proc) and prints one JSON object: ``target`` (the pid; null and nothing else when no
#: runner is found), ``attach``
#: (PTRACE_ATTACH), ``process_vm_readv``, ``environ`` and ``mem`` (opening /proc files):
#: each ``attached``/``read``/``opened`` or the errno name, and ``seccomp`` (the probe's own
#: mode from /proc/self/status). An attach that works is undone before the probe goes on.
TRACE_PROBE = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
target = int(sys.argv[1]) if len(sys.argv) > 1 else None
if target is None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[1:3] == [b"-m", b"airlock.runner"]:
                target = int(entry)
out = {"target": target}
if target is None:
    print(json.dumps(out))
    sys.exit(0)
if libc.ptrace(16, target, None, None) == 0:  # PTRACE_ATTACH
    out["attach"] = "attached"
    os.waitpid(target, 0x40000000)  # __WALL: the attach stop
    libc.ptrace(17, target, None, None)  # PTRACE_DETACH: let it run on
else:
    out["attach"] = errno.errorcode[ctypes.get_errno()]
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local, remote = iovec(ctypes.addressof(buf), 8), iovec(0x1000, 8)
vp, ul = ctypes.c_void_p, ctypes.c_ulong
libc.process_vm_readv.argtypes = [ctypes.c_int, vp, ul, vp, ul, ul]
n = libc.process_vm_readv(target, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)
out["process_vm_readv"] = errno.errorcode[ctypes.get_errno()] if n < 0 else "read"
for name in ("environ", "mem"):
    try:
        with open(f"/proc/{target}/{name}", "rb") as f:
            f.read(1)
        out[name] = "opened"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
with open("/proc/self/status") as f:
    out["seccomp"] = [line.split()[1] for line in f if line.startswith("Seccomp:")][0]
print(json.dumps(out))
"""


def trace_probe_command(python: str = "/opt/venv/bin/python") -> str:
    """A bash command that runs :data:`TRACE_PROBE` on the runner with ``python``."""
    return f"{python} - <<'EOF'\n{TRACE_PROBE.lstrip()}EOF"

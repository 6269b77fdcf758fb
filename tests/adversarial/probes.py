"""What the hostile agent runs inside the sandbox: stdlib Python sources, each printing one
JSON object of observations (``ok`` where an attempt succeeded, else the errno name or what
was seen). The tests judge them; :func:`python_command` wraps one as a ``bash`` tool call."""

from __future__ import annotations

#: Python source: the runner's pid (found through /proc) in ``runner`` and ``out["runner_pid"]``.
FIND_RUNNER = r"""runner = None
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[1:3] == [b"-m", b"airlock.runner"]:
            runner = int(entry)
out["runner_pid"] = runner
"""

#: Privilege: every way a process with the sandbox's uid could gain or use privilege.
PRIVILEGE = (
    r"""
import ctypes, errno, json, os, socket, stat
libc = ctypes.CDLL(None, use_errno=True)
out = {}

def attempt(name, fn):
    try:
        result = fn()
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
        return
    if isinstance(result, int) and result < 0:
        out[name] = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    else:
        out[name] = "ok"

with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
out["caps"] = {k: status.get(k) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
out["uid"] = [os.getuid(), os.geteuid(), os.getgid()]
setuid_files = []
for root in ("/usr", "/opt", "/etc", "/var", "/run", "/tmp", "/workspace"):
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        for name in filenames:
            try:
                mode = os.lstat(os.path.join(dirpath, name)).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                setuid_files.append(os.path.join(dirpath, name))
out["setuid_files"] = setuid_files
attempt("setuid_0", lambda: os.setuid(0))
attempt("setgid_0", lambda: os.setgid(0))
attempt("write_rootfs", lambda: open("/usr/bin/airlock-owned", "w").close())
attempt("write_etc_passwd", lambda: open("/etc/passwd", "a").close())
attempt("remount_root_rw", lambda: libc.mount(None, b"/", None, 32, None))  # MS_REMOUNT
attempt("mount_tmpfs", lambda: libc.mount(b"none", b"/workspace", b"tmpfs", 0, None))
attempt("mount_proc", lambda: libc.mount(b"proc", b"/workspace", b"proc", 0, None))
if os.path.exists("/dev/fuse"):  # gVisor has one: using it needs a mount
    def fuse():
        fd = os.open("/dev/fuse", os.O_RDWR)
        opts = f"fd={fd},rootmode=40000,user_id=65534,group_id=65534".encode()
        return libc.mount(b"airlock", b"/workspace", b"fuse", 0, opts)
    attempt("mount_fuse", fuse)
else:
    out["mount_fuse"] = "ENOENT"
for flag, name in ((0x10000000, "user"), (0x00020000, "mount"), (0x40000000, "net"), (0x20000000, "pid")):
    attempt(f"unshare_{name}", lambda flag=flag: libc.unshare(flag))
attempt("setns_host_net", lambda: libc.setns(os.open("/proc/1/ns/net", os.O_RDONLY), 0))
attempt("chroot", lambda: os.chroot("/tmp"))
attempt("mknod_block_device", lambda: os.mknod("/workspace/sda", stat.S_IFBLK | 0o600, os.makedev(8, 0)))
attempt("mknod_char_device", lambda: os.mknod("/workspace/mem", stat.S_IFCHR | 0o600, os.makedev(1, 1)))
attempt("raw_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet_socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("sethostname", lambda: libc.sethostname(b"pwned", 5))
attempt("reboot", lambda: libc.reboot(0x4321FEDC))
attempt("kexec_load", lambda: libc.syscall(246, 0, 0, 0, 0))
attempt("init_module", lambda: libc.syscall(175, 0, 0, b""))
attempt("bpf", lambda: libc.syscall(321, 0, 0, 0))
attempt("perf_event_open", lambda: libc.syscall(298, 0, 0, -1, -1, 0))
attempt("iopl", lambda: libc.syscall(172, 3))
attempt("clock_settime", lambda: libc.clock_settime(0, (ctypes.c_long * 2)(0, 0)))
attempt("read_proc_kcore", lambda: open("/proc/kcore", "rb").read(1))
attempt("read_dev_mem", lambda: open("/dev/mem", "rb").read(1))
attempt("write_proc_sys", lambda: open("/proc/sys/kernel/hostname", "w").write("x"))
attempt("write_sysfs", lambda: open("/sys/kernel/uevent_helper", "w").write("/x"))
attempt("write_proc_sysrq", lambda: open("/proc/sysrq-trigger", "w").write("b"))
"""
    + FIND_RUNNER
    + r"""libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if runner is not None:
    attempt("ptrace_runner", lambda: libc.ptrace(16, runner, None, None))
    if out["ptrace_runner"] == "ok":
        libc.ptrace(17, runner, None, None)
    attempt("read_runner_mem", lambda: open(f"/proc/{runner}/mem", "rb").read(1))
    attempt("signal_runner", lambda: os.kill(runner, 0))
sockets = ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock")
out["docker_sockets"] = [p for p in sockets if os.path.exists(p)]
out["devices"] = sorted(os.listdir("/dev"))
print(json.dumps(out))
"""
)


def python_command(source: str, python: str = "/opt/venv/bin/python") -> str:
    """A bash command that runs ``source`` with the image's Python."""
    return f"{python} - <<'EOF'\n{source.lstrip()}EOF"


#: The runner's channel: its socket, its token, its control directory, its process.
RUNNER_CHANNEL = (
    r"""
import errno, json, os, socket
out = {}

def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))

def connect_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    finally:
        s.close()

attempt("list_control_dir", lambda: os.listdir("/run/airlock"))
attempt("read_token_file", lambda: open("/run/airlock/token").read())
attempt("connect_runner_socket", lambda: connect_unix("/run/airlock/runner.sock"))
attempt("replace_runner_socket", lambda: os.symlink("/tmp/evil.sock", "/run/airlock/runner.sock.new"))
attempt("create_in_control_dir", lambda: open("/run/airlock/evil", "w").close())
attempt("remove_runner_socket", lambda: os.unlink("/run/airlock/runner.sock"))
"""
    + FIND_RUNNER
    + r"""if runner is not None:
    attempt("list_runner_fds", lambda: os.listdir(f"/proc/{runner}/fd"))
    attempt("open_runner_fd", lambda: [os.open(f"/proc/{runner}/fd/{n}", os.O_RDONLY) for n in range(3, 16)])
    attempt("runner_root", lambda: os.listdir(f"/proc/{runner}/root/run/airlock"))
    attempt("runner_maps", lambda: open(f"/proc/{runner}/maps").read(1))
listening = []
for name in ("tcp", "tcp6", "udp", "udp6"):
    try:
        lines = open(f"/proc/net/{name}").read().splitlines()[1:]
    except OSError:
        continue
    listening += [f"{name} {l.split()[1]}" for l in lines if name.startswith("udp") or l.split()[3] == "0A"]
out["inet_listeners"] = listening
print(json.dumps(out))
"""
)

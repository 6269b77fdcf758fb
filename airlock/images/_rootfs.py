"""A minimal Debian root filesystem from packages, with no registry and no debootstrap.

The recipe (about 10 s with a cold package cache): apt computes the
dependency closure of a few packages against an *empty* dpkg status, the ``.deb`` files are
downloaded into a cache, and each one is unpacked with ``dpkg-deb --fsys-tarfile | tar -x
--keep-directory-symlink`` into a merged-``/usr`` skeleton (plain ``dpkg-deb -x`` would
replace the ``bin -> usr/bin`` links with directories). No maintainer scripts run, so the
few things they would do are done here: ``/etc/passwd`` and ``/etc/group`` from
base-passwd, the CA bundle via ``update-ca-certificates``. The result has no dpkg database
(so no apt inside the sandbox).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from airlock.errors import ImageError

from ._bytecode import compile_argv
from ._proc import run_command

#: What the runner image needs: python (+ venv), libstdc++ for grpcio, CA certificates, a
#: shell and the usual utilities for the bash tool (awk and diff among them: agents reach for
#: them first).
BASE_PACKAGES: tuple[str, ...] = (
    "python3",
    "python3-venv",
    "libstdc++6",
    "ca-certificates",
    "usr-is-merged",
    "base-files",
    "base-passwd",
    "dash",
    "bash",
    "coreutils",
    "tar",
    "grep",
    "sed",
    "findutils",
    "mawk",
    "diffutils",
    "gzip",
    "libc-bin",
)

_MERGED_USR = ("bin", "sbin", "lib", "lib64")
_URI_LINE = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+) (?P<size>\d+)")
#: Trimmed from the image: documentation nobody reads inside a sandbox.
_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")


@dataclass(frozen=True)
class DebPackage:
    """One ``.deb`` of the closure."""

    name: str
    version: str
    arch: str
    filename: str
    size: int

    @property
    def apt_ref(self) -> str:
        """``name:arch=version`` for ``apt-get download``."""
        return f"{self.name}:{self.arch}={self.version}"


def parse_print_uris(text: str) -> list[DebPackage]:
    """Parse ``apt-get install --print-uris`` output into packages.

    Raises:
        ImageError: no package line was found.
    """
    debs: list[DebPackage] = []
    for line in text.splitlines():
        m = _URI_LINE.match(line.strip())
        if not m or not m["file"].endswith(".deb"):
            continue
        stem = m["file"][: -len(".deb")]
        try:
            name, version, arch = stem.split("_")
        except ValueError:
            continue
        debs.append(DebPackage(name, unquote(version), arch, m["file"], int(m["size"])))
    if not debs:
        raise ImageError(f"apt resolved no packages; its output was: {text[-500:]!r}")
    return sorted(debs, key=lambda d: d.name)


async def dpkg_architecture() -> str:
    """The host's Debian architecture (``amd64``, ``arm64``)."""
    return (await run_command(["dpkg", "--print-architecture"], what="dpkg --print-architecture")).strip()


async def resolve_closure(packages: tuple[str, ...] = BASE_PACKAGES) -> list[DebPackage]:
    """The full dependency closure of ``packages`` as if nothing were installed.

    Runs ``apt-get update`` once if the package lists are missing.

    Raises:
        ImageError: apt is missing or cannot resolve the packages.
    """
    if shutil.which("apt-get") is None:
        raise ImageError("the offline image build needs a Debian/Ubuntu host with apt-get")
    with tempfile.TemporaryDirectory(prefix="airlock-apt-") as tmp:
        (Path(tmp) / "partial").mkdir()
        argv = [
            "apt-get",
            "-o",
            "Dir::State::status=/dev/null",
            "-o",
            f"Dir::Cache::archives={tmp}",
            "-o",
            "APT::Install-Recommends=0",
            "install",
            "--print-uris",
            "-qq",
            *packages,
        ]
        try:
            out = await run_command(argv, what="apt-get install --print-uris")
        except ImageError:
            await run_command(["apt-get", "update", "-qq"], what="apt-get update")
            out = await run_command(argv, what="apt-get install --print-uris")
    return parse_print_uris(out)


async def download_debs(debs: list[DebPackage], cache: Path) -> list[Path]:
    """Make sure every ``.deb`` is in ``cache`` (``apt-get download`` the missing ones).

    Raises:
        ImageError: a download fails or a file has the wrong size.
    """
    await asyncio.to_thread(cache.mkdir, parents=True, exist_ok=True)
    missing = await asyncio.to_thread(lambda: [d for d in debs if not _cached(cache, d)])
    if missing:
        await run_command(
            ["apt-get", "download", "-qq", *(d.apt_ref for d in missing)],
            cwd=cache,
            what="apt-get download",
        )
    return await asyncio.to_thread(_collect, cache, debs)


def _collect(cache: Path, debs: list[DebPackage]) -> list[Path]:
    paths = []
    for deb in debs:
        path = _cached(cache, deb)
        if path is None:
            raise ImageError(f"apt-get download did not produce {deb.filename} in {cache}")
        paths.append(path)
    return paths


def _cached(cache: Path, deb: DebPackage) -> Path | None:
    for name in (deb.filename, unquote(deb.filename)):
        path = cache / name
        if path.is_file() and path.stat().st_size == deb.size:
            return path
    return None


def closure_key(debs: list[DebPackage]) -> str:
    """A short hash naming this exact set of package versions."""
    text = "\n".join(f"{d.name} {d.version} {d.arch}" for d in debs)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def python_version(debs: list[DebPackage]) -> str:
    """The ``X.Y`` of the ``python3.X`` package in the closure.

    Raises:
        ImageError: there is none.
    """
    for deb in debs:
        m = re.fullmatch(r"python3\.(\d+)", deb.name)
        if m:
            return f"3.{m[1]}"
    raise ImageError("the package closure contains no python3.X package")


def glibc_version(debs: list[DebPackage]) -> tuple[int, int]:
    """``(major, minor)`` of the closure's libc6 (for the manylinux wheel tags)."""
    for deb in debs:
        if deb.name == "libc6":
            m = re.match(r"(?:\d+:)?(\d+)\.(\d+)", deb.version)
            if m:
                return int(m[1]), int(m[2])
    raise ImageError("the package closure contains no libc6")


async def unpack_rootfs(root: Path, debs: list[Path]) -> None:
    """Unpack ``debs`` into ``root`` (a new directory) over a merged-/usr skeleton.

    Raises:
        ImageError: unpacking fails.
    """
    await asyncio.to_thread(_skeleton, root)
    # One shell runs every pipeline: ~70 packages, in closure order (deterministic).
    script = (
        'set -e; root="$1"; shift; for f in "$@"; do '
        'dpkg-deb --fsys-tarfile "$f" | tar -x -C "$root" --keep-directory-symlink; done'
    )
    await run_command(["sh", "-c", script, "unpack", root, *debs], what="unpacking the .deb files")
    await asyncio.to_thread(_after_unpack, root)


def _skeleton(root: Path) -> None:
    root.mkdir(parents=True)
    for d in _MERGED_USR:
        (root / "usr" / d).mkdir(parents=True, exist_ok=True)
        (root / d).symlink_to(f"usr/{d}")


def _after_unpack(root: Path) -> None:
    etc = root / "etc"
    for name in ("passwd", "group"):
        master = root / "usr/share/base-passwd" / f"{name}.master"
        if not master.is_file():
            raise ImageError(f"base-passwd did not provide {master.name}")
        shutil.copyfile(master, etc / name)
    for rel in _TRIM:
        shutil.rmtree(root / rel, ignore_errors=True)


def chroot_env() -> dict[str, str]:
    """A clean environment for commands run in the rootfs (nothing leaks from the host)."""
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }


async def in_chroot(root: Path, *argv: str, what: str) -> str:
    """Run a command inside ``root`` with ``chroot`` (needs root)."""
    if os.geteuid() != 0:
        raise ImageError("the offline image build runs chroot and must run as root")
    return await run_command(["chroot", root, *argv], env=chroot_env(), what=what)


async def finish_base(root: Path) -> None:
    """Do what the skipped maintainer scripts would: CA bundle, a venv at /opt/venv.

    Raises:
        ImageError: a step fails.
    """
    await asyncio.to_thread(_ca_list, root)
    await in_chroot(root, "update-ca-certificates", "--fresh", what="update-ca-certificates")
    await in_chroot(root, "python3", "-m", "venv", "/opt/venv", what="python3 -m venv /opt/venv")
    # Debian byte-compiles the stdlib in postinst (skipped here); the root fs is read-only at
    # run time, so without this every sandbox start would compile it again (~100 ms).
    await in_chroot(
        root, *compile_argv("/usr/lib/python3", "/usr/lib/python3.11"), what="compiling the standard library"
    )
    await asyncio.to_thread(_dirs, root)
    await asyncio.to_thread(_awk, root)


def _awk(root: Path) -> None:
    # mawk's postinst would make it `awk` (update-alternatives, skipped here).
    awk = root / "usr/bin/awk"
    if (root / "usr/bin/mawk").is_file() and not awk.exists():
        awk.symlink_to("mawk")


def _ca_list(root: Path) -> None:
    # ca-certificates' postinst would write this list (via debconf): trust every shipped CA.
    shipped = root / "usr/share/ca-certificates"
    names = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*.crt"))
    if not names:
        raise ImageError("ca-certificates shipped no certificates")
    (root / "etc/ca-certificates.conf").write_text("\n".join(names) + "\n")


def _dirs(root: Path) -> None:
    if not (root / "etc/ssl/certs/ca-certificates.crt").is_file():
        raise ImageError("update-ca-certificates produced no /etc/ssl/certs/ca-certificates.crt")
    for d in ("workspace", "run/airlock"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chown(root / "workspace", 65534, 65534)
    (root / "tmp").mkdir(exist_ok=True)
    os.chmod(root / "tmp", 0o1777)

"""``airlock-test-postgres:15``: a PostgreSQL 15 image for the tests, built offline from Debian's
``postgresql-15`` package by the runner image's recipe (no registry: no ``postgres:`` image can be
pulled). Run ``python -m tests.support.postgres_image`` (as root: the rootfs is chowned).

apt resolves the closure against an empty dpkg status, the ``.deb`` files come from the shared
image cache, they are unpacked into a merged-/usr rootfs and imported with ``docker import``. No
maintainer script runs, so this does their part: a ``postgres`` user and group (uid/gid
:data:`POSTGRES_UID`), the data and socket directories. The JIT's LLVM libraries are left out
(PostgreSQL runs without JIT when they are missing); the image has no dpkg database.

The entrypoint (:data:`ENTRYPOINT`) behaves like the official image's for what testcontainers'
``PostgresContainer`` uses: ``POSTGRES_USER``/``POSTGRES_PASSWORD``/``POSTGRES_DB`` (defaults
``test``), initdb on first start, scram-sha-256 for TCP connections on 0.0.0.0:5432, the container's
command as extra ``postgres`` arguments (``-c name=value``). The image is labelled with its package
closure key and recipe key; a build whose keys match an existing image is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airlock.errors import ImageError
from airlock.images import (
    closure_key,
    docker_client,
    download_debs,
    find_image,
    image_cache_dir,
    import_rootfs,
    resolve_closure,
    unpack_rootfs,
)

TAG = "airlock-test-postgres:15"
#: postgresql-15 and what the entrypoint (a POSIX shell script) needs.
PACKAGES: tuple[str, ...] = (
    "postgresql-15",
    "usr-is-merged",
    "base-files",
    "base-passwd",
    "dash",
    "coreutils",
    "libc-bin",
)
LABEL_PACKAGES = "airlock.test-postgres.packages"
LABEL_RECIPE = "airlock.test-postgres.recipe"
POSTGRES_UID = 999
BINDIR = "/usr/lib/postgresql/15/bin"
PGDATA = "/var/lib/postgresql/data"
#: Debian builds postgres with /var/run/postgresql as its socket directory.
SOCKET_DIR = "/run/postgresql"
ENTRYPOINT_PATH = "/usr/local/bin/postgres-entrypoint"
#: Not needed without JIT (and about 120 MB): llvmjit and the libraries only it links.
_TRIM_GLOBS = (
    "usr/lib/postgresql/15/lib/llvmjit*",
    "usr/lib/postgresql/15/lib/bitcode",
    "usr/lib/*/libLLVM-*",
    "usr/lib/*/libz3.so*",
)

ENTRYPOINT = r"""#!/bin/sh
# initdb on first start (POSTGRES_USER/PASSWORD/DB, default test), then postgres with the
# container's arguments (a leading "postgres" is dropped, as in the official image).
set -eu
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
POSTGRES_USER="${POSTGRES_USER:-test}"
POSTGRES_PASSWORD="${POSTGRES_PASSWORD:-test}"
POSTGRES_DB="${POSTGRES_DB:-test}"
case "$POSTGRES_DB$POSTGRES_USER" in
  *'"'*) echo "postgres-entrypoint: POSTGRES_DB and POSTGRES_USER must not contain '\"'" >&2; exit 2 ;;
esac
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  # --no-sync: a throwaway test server; its files need not survive a host crash.
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 --no-sync >/dev/null
  rm -f "$pwfile"
  printf "listen_addresses = '0.0.0.0'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all 0.0.0.0/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    printf 'CREATE DATABASE "%s"\n' "$POSTGRES_DB" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
if [ "${1:-}" = postgres ]; then shift; fi
# postgres itself logs "database system is ready to accept connections" when it is.
exec postgres -D "$PGDATA" "$@"
"""


def recipe_key() -> str:
    """Names this recipe (this module's text: entrypoint, layout, trimming): a change rebuilds."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


@dataclass
class PostgresImageReport:
    """What :func:`build_postgres_image` did."""

    tag: str
    image_id: str
    skipped: bool
    seconds: float
    size_bytes: int

    def summary(self) -> str:
        what = "current, not rebuilt" if self.skipped else "built"
        return f"{self.tag}: {what} in {self.seconds:.1f} s, {self.size_bytes / 1e6:.0f} MB"


async def build_postgres_image(*, force: bool = False, tag: str = TAG) -> PostgresImageReport:
    """Build the image (see the module docstring) unless one with the same keys exists.

    Raises:
        ImageError: a step failed, or not run as root.
    """
    started = time.perf_counter()
    client = await asyncio.to_thread(_client)
    existing = await asyncio.to_thread(find_image, client, tag)
    # apt takes about a second to resolve: its answer is kept while its package lists stay the same.
    apt_state = await asyncio.to_thread(_apt_state)
    known = await asyncio.to_thread(_known_closure_key, apt_state)
    debs = None
    if known is None:
        debs = await resolve_closure(PACKAGES)
        known = closure_key(debs)
        await asyncio.to_thread(_remember_closure_key, apt_state, known)
    labels = {LABEL_PACKAGES: known, LABEL_RECIPE: recipe_key()}
    if existing and not force and _labels(existing) | labels == _labels(existing):
        return PostgresImageReport(tag, existing["Id"], True, time.perf_counter() - started, existing["Size"])
    if os.geteuid() != 0:
        raise ImageError("building the test PostgreSQL image chowns its files and must run as root")
    debs = debs or await resolve_closure(PACKAGES)
    arch = await asyncio.to_thread(_host_arch)
    deb_paths = await download_debs(debs, image_cache_dir() / "debs" / arch)
    with tempfile.TemporaryDirectory(prefix="airlock-pg-image-") as tmp:
        root = Path(tmp) / "rootfs"
        await unpack_rootfs(root, deb_paths)
        await asyncio.to_thread(finish_rootfs, root)
        labels[LABEL_PACKAGES] = closure_key(debs)
        image_id = await asyncio.to_thread(import_rootfs, client, root, tag, _changes(labels))
    if existing and existing["Id"] != image_id:  # the tag moved: drop the image it named
        await asyncio.to_thread(_remove_quietly, client, existing["Id"])
    info = await asyncio.to_thread(find_image, client, tag)
    size = info["Size"] if info else 0
    return PostgresImageReport(tag, image_id, False, time.perf_counter() - started, size)


def _remove_quietly(client: Any, image_id: str) -> None:
    from docker.errors import DockerException

    with contextlib.suppress(DockerException):  # still used by a container: kept
        client.api.remove_image(image_id)


def _apt_state() -> str:
    """A fingerprint of apt's sources and package lists: the closure changes only with them."""
    paths = [
        *Path("/var/lib/apt/lists").glob("*_Packages*"),
        *Path("/etc/apt").glob("sources.list*"),
        *Path("/etc/apt/sources.list.d").glob("*"),
    ]
    stats = sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths if p.is_file())
    return hashlib.sha256(json.dumps([PACKAGES, stats]).encode()).hexdigest()


def _closure_cache() -> Path:
    return image_cache_dir() / "test-postgres-closure.json"


def _known_closure_key(apt_state: str) -> str | None:
    try:
        saved = json.loads(_closure_cache().read_text())
    except (OSError, ValueError):
        return None
    key = saved.get("closure_key") if isinstance(saved, dict) and saved.get("apt") == apt_state else None
    return key if isinstance(key, str) else None


def _remember_closure_key(apt_state: str, key: str) -> None:
    path = _closure_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"apt": apt_state, "closure_key": key}))


def _client() -> Any:
    from layer0 import EnvError

    try:
        return docker_client(600)
    except EnvError as e:
        raise ImageError(str(e)) from e


def _labels(info: dict[str, Any]) -> dict[str, str]:
    return dict((info.get("Config") or {}).get("Labels") or {})


def _host_arch() -> str:
    """dpkg's architecture: the runner image's .deb cache folder is named by it (shared here)."""
    out = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise ImageError(f"dpkg --print-architecture failed: {out.stderr.strip()}")
    return out.stdout.strip()


def finish_rootfs(root: Path) -> None:
    """Do what the skipped maintainer scripts would, drop the JIT, add the entrypoint."""
    if not (root / BINDIR / "postgres").is_file():
        raise ImageError(f"postgresql-15 did not provide {BINDIR}/postgres")
    if not (root / "usr/lib/locale/C.utf8").is_dir():
        raise ImageError("libc-bin did not provide the C.UTF-8 locale")
    uid = POSTGRES_UID
    with (root / "etc/passwd").open("a") as f:
        f.write(f"postgres:x:{uid}:{uid}:PostgreSQL administrator:/var/lib/postgresql:/bin/sh\n")
    with (root / "etc/group").open("a") as f:
        f.write(f"postgres:x:{uid}:\n")
    var_run = root / "var/run"  # base-files ships a directory; its postinst makes it a link to /run
    if var_run.is_dir() and not var_run.is_symlink():
        var_run.rmdir()
    if not var_run.is_symlink():
        var_run.symlink_to("/run")
    for rel, mode in ((PGDATA, 0o700), ("/var/lib/postgresql", 0o755), (SOCKET_DIR, 0o2775)):
        path = root / rel.lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, uid, uid)
        path.chmod(mode)
    (root / "tmp").mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for pattern in _TRIM_GLOBS:
        for path in root.glob(pattern):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    entrypoint = root / ENTRYPOINT_PATH.lstrip("/")
    entrypoint.parent.mkdir(parents=True, exist_ok=True)
    entrypoint.write_text(ENTRYPOINT)
    entrypoint.chmod(0o755)


def _changes(labels: dict[str, str]) -> list[str]:
    return [
        f"ENV PATH={BINDIR}:/usr/local/bin:/usr/bin:/bin",
        "ENV LANG=C.UTF-8",
        f"ENV PGDATA={PGDATA}",
        "ENV HOME=/var/lib/postgresql",
        f"USER {POSTGRES_UID}:{POSTGRES_UID}",
        "WORKDIR /var/lib/postgresql",
        "EXPOSE 5432",
        f"ENTRYPOINT {json.dumps([ENTRYPOINT_PATH])}",
        *(f'LABEL {k}="{v}"' for k, v in labels.items()),
    ]


def main() -> None:
    """Build (or find current) the image; print what was done, its time and size."""
    try:
        report = asyncio.run(build_postgres_image(force="--force" in sys.argv[1:]))
    except ImageError as e:
        sys.exit(f"cannot build {TAG}: {e}")
    print(report.summary())


if __name__ == "__main__":
    main()

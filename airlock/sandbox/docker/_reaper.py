"""Find and remove sandbox objects whose owner process is gone.

Every container (and, with network policy, network) a DockerEnvironment creates carries the
labels of :mod:`._labels`; every per-sandbox control directory has an ``<id>.owner`` file
next to it, written *before* the directory. An object is an orphan when its owner ran on
this host and that process no longer exists (or its pid was reused). Used by
DockerEnvironment's startup sweep and by ``airlock gc``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock.images import docker_errors

from ._labels import LABEL_OWNER, LABEL_OWNER_START, LABEL_SANDBOX, Owner, owner_is_gone
from ._remove import force_remove

SANDBOX_ID = re.compile(r"^sb-[0-9a-f]{12,32}$")


def default_state_dir() -> Path:
    """Where per-sandbox control directories live.

    ``$AIRLOCK_STATE_DIR``; else ``/run/airlock`` for root; else ``$XDG_RUNTIME_DIR/airlock``
    or ``/tmp/airlock-<uid>``.
    """
    env = os.environ.get("AIRLOCK_STATE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/airlock")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "airlock" if runtime else Path(f"/tmp/airlock-{os.geteuid()}")


def owner_file(state_dir: Path, sandbox_id: str) -> Path:
    """``<state_dir>/<id>.owner``."""
    return state_dir / f"{sandbox_id}.owner"


def write_owner_file(state_dir: Path, sandbox_id: str, labels: dict[str, str]) -> None:
    """Record who owns a control directory (before creating it)."""
    state_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    owner_file(state_dir, sandbox_id).write_text(json.dumps(labels))


@dataclass
class ReapReport:
    """What a sweep removed (and what it could not)."""

    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        """How many objects were removed."""
        return len(self.containers) + len(self.networks) + len(self.directories)

    def items(self) -> list[tuple[str, str]]:
        """``(kind, name)`` of each removed object."""
        return [
            *(("container", c) for c in self.containers),
            *(("network", n) for n in self.networks),
            *(("directory", d) for d in self.directories),
        ]

    def summary(self) -> str:
        """How many containers and networks were removed."""
        return f"{len(self.containers)} container(s), {len(self.networks)} network(s)"


def reap_orphans(client: Any, state_dir: Path | None = None, *, include_live: bool = False) -> ReapReport:
    """Remove containers, networks and control directories whose owner is gone (blocking).

    Args:
        client: a ``docker.DockerClient``.
        state_dir: control directories' parent (default :func:`default_state_dir`).
        include_live: also remove objects of owners that are still running (``gc --all``).
    """
    errors = docker_errors()
    report = ReapReport()
    host = socket.gethostname()

    def orphaned(labels: dict[str, str]) -> bool:
        owner = Owner.parse(labels.get(LABEL_OWNER, ""), labels.get(LABEL_OWNER_START, ""))
        if owner is None:
            return False
        return include_live or owner_is_gone(owner, hostname=host)

    try:
        # The low-level listing: ``containers.list`` inspects each container in turn and fails
        # outright when one is removed meanwhile (another controller's teardown).
        containers = client.api.containers(all=True, filters={"label": LABEL_SANDBOX})
        networks = client.networks.list(filters={"label": LABEL_SANDBOX})
    except errors.DockerException as e:
        report.errors.append(f"listing sandbox objects failed: {e}")
        return report
    for c in containers:
        labels = c.get("Labels") or {}
        name = ((c.get("Names") or ["?"])[0]).lstrip("/")
        if orphaned(labels):
            try:
                if force_remove(client, c["Id"]):
                    report.containers.append(f"{name} ({labels.get(LABEL_SANDBOX)})")
            except errors.DockerException as e:
                report.errors.append(f"container {name}: {e}")
    for n in networks:
        if orphaned(n.attrs.get("Labels") or {}):
            try:
                n.remove()
                report.networks.append(n.name)
            except errors.NotFound:
                pass
            except errors.DockerException as e:
                report.errors.append(f"network {n.name}: {e}")
    _reap_dirs(state_dir or default_state_dir(), orphaned, report)
    return report


def _reap_dirs(state_dir: Path, orphaned: Any, report: ReapReport) -> None:
    try:
        owner_files = sorted(state_dir.glob("sb-*.owner"))
    except OSError as e:
        report.errors.append(f"listing {state_dir}: {e}")
        return
    for path in owner_files:
        sandbox_id = path.name[: -len(".owner")]
        if not SANDBOX_ID.match(sandbox_id):
            continue
        try:
            labels = json.loads(path.read_text())
        except (OSError, ValueError):
            labels = {}
        if not isinstance(labels, dict) or not orphaned(labels):
            continue
        try:
            # The control dir, and the proxy's and file credentials' dirs beside it.
            for directory in (state_dir / sandbox_id, *state_dir.glob(f"{sandbox_id}.*/")):
                if directory.is_dir() and not directory.is_symlink():
                    shutil.rmtree(directory)
                    report.directories.append(str(directory))
            path.unlink(missing_ok=True)
        except OSError as e:
            report.errors.append(f"{state_dir / sandbox_id}: {e}")

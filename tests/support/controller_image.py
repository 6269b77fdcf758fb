"""The controller image run as the Helm chart's Deployment runs it, on the local engine.

The pod's security context becomes Docker's flags (uid/gid 65534, read-only root, no
capabilities, no new privileges, a tmpfs ``/tmp``); its volumes become bind mounts (the
config file at ``/etc/airlock``, the token Secret's file, the probe canary, a data
directory); its args are the Deployment's, verbatim.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

from airlock.images import controller_image_tag

NOBODY = 65534
LABEL = "airlock.test.controller-image"


@dataclass(frozen=True)
class RunningController:
    """A controller container: its id, where its port is published, its token."""

    container: Any
    address: str
    token: str

    def logs(self) -> str:
        return str(self.container.logs().decode(errors="replace"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def run_controller_image(config_text: str, args: Sequence[str], work: Path) -> Iterator[RunningController]:
    """The controller image with ``config_text`` as ``/etc/airlock/airlock.yaml`` and ``args``
    (the Deployment's), hardened as the chart's pod; removed on exit."""
    dirs = {name: work / name for name in ("etc", "token", "probe", "data")}
    for path in dirs.values():
        path.mkdir(parents=True)
    (dirs["etc"] / "airlock.yaml").write_text(config_text)
    token = secrets.token_urlsafe(32)
    (dirs["token"] / "token").write_text(token)
    (dirs["probe"] / "canary").write_text(secrets.token_urlsafe(24))
    for name in ("token", "probe"):  # a Secret volume's files: read-only, readable by the pod's group
        for f in dirs[name].iterdir():
            f.chmod(0o444)
    os.chown(dirs["data"], NOBODY, NOBODY)
    port = _free_port()
    client = docker.from_env()
    container = client.containers.run(
        controller_image_tag(),
        list(args),
        detach=True,
        user=f"{NOBODY}:{NOBODY}",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        tmpfs={"/tmp": "size=64m"},
        volumes={
            str(dirs["etc"]): {"bind": "/etc/airlock", "mode": "ro"},
            str(dirs["token"]): {"bind": "/var/run/airlock/token", "mode": "ro"},
            str(dirs["probe"]): {"bind": "/var/run/airlock/probe", "mode": "ro"},
            str(dirs["data"]): {"bind": "/var/lib/airlock", "mode": "rw"},
        },
        ports={"7878/tcp": ("127.0.0.1", port)},
        labels={LABEL: "1"},
    )
    try:
        yield RunningController(container, f"127.0.0.1:{port}", token)
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)


def wait_listening(running: RunningController, limit_s: float = 60.0) -> None:
    """Until the container says it listens (or fail with its log)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        running.container.reload()
        if running.container.status == "exited":
            raise AssertionError(f"the controller exited:\n{running.logs()}")
        if "listening on" in running.logs():
            return
        time.sleep(0.2)
    raise AssertionError(f"the controller did not listen within {limit_s:.0f} s:\n{running.logs()}")

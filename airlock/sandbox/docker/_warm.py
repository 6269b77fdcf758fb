"""The Docker backend's warm pool members: their shape, and credentials bound at claim time.

A member is a started, SERVING sandbox container holding no secret and no agent. Its shape
is what was fixed when it started: image, isolation boundary, resource limits, and where
file credentials will appear (their target paths, not their values or names), and its
network profile: none, or an internal network with a proxy container (joined to the egress
networks when anything may leave, with DNS when a name rule needs it). A member with a
network has both up, the proxy waiting for its configuration.

Credentials are bound when a job claims the member:

* ``env_var``: sent with the job's Execute (``ExecuteRequest.environment``); the runner sets
  them before it builds the turn, so ``docker inspect`` never shows them;
* ``file``: each target path is a read-only bind mount of an empty placeholder on the host
  (0600, owned by the sandbox user) since the container started; the claim writes the value
  into that same file (the mount follows the inode) and makes it 0400;
* ``sidecar``, and the egress rules: the claim writes the secrets into the proxy's own
  directory, then its configuration; the waiting proxy starts its listeners on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airlock.policy import ResolvedCredentials, SandboxPlan
from airlock.sandbox._limits import Limits
from airlock.sandbox._pool import shape_id

from ._config import Boundary
from ._instance import DockerInstance

__all__ = [
    "LABEL_POOL",
    "DockerShape",
    "LateFiles",
    "NetworkProfile",
    "WarmMember",
    "shape_of",
]

#: Label of every pool member: its shape's id (a member claimed by a job keeps it).
LABEL_POOL = "airlock.pool"


@dataclass(frozen=True)
class NetworkProfile:
    """What a sandbox's network fixes when it starts (the rules and secrets come later)."""

    #: The proxy joins the egress networks (some egress is allowed).
    egress: bool
    #: The proxy has a resolver (a name rule, or an allow default).
    resolves_names: bool


@dataclass(frozen=True)
class DockerShape:
    """Everything a Docker sandbox fixes when it starts (a warm pool's key)."""

    image: str
    boundary: Boundary
    limits: Limits
    #: Target paths of the file credentials, sorted.
    files: tuple[str, ...] = ()
    #: None: no network at all.
    network: NetworkProfile | None = None

    @property
    def id(self) -> str:
        """A short stable id (the members' :data:`LABEL_POOL`)."""
        return shape_id(self)

    @property
    def label(self) -> str:
        """One line for logs and statistics."""
        files = f", {len(self.files)} file credential(s)" if self.files else ""
        net = self.network
        network = (
            ""
            if net is None
            else f", proxy{' + egress' if net.egress else ''}{' + dns' if net.resolves_names else ''}"
        )
        return f"{self.image} {self.boundary.kind} {self.limits.describe()}{files}{network} [{self.id}]"


def shape_of(plan: SandboxPlan, image: str, boundary: Boundary, limits: Limits) -> DockerShape:
    """The shape of a sandbox for ``plan``."""
    files = tuple(sorted(c.path for c in plan.credentials if c.kind == "file" and c.path is not None))
    network = None
    if plan.needs_egress_proxy or plan.sidecars:
        network = NetworkProfile(egress=plan.needs_egress_proxy, resolves_names=plan.egress.resolves_names)
    return DockerShape(image=image, boundary=boundary, limits=limits, files=files, network=network)


class LateFiles:
    """Placeholders of a member's file credentials, filled when a job claims it (blocking)."""

    def __init__(self, directory: Path, paths: tuple[str, ...], user: tuple[int, int], root: bool) -> None:
        self.dir = directory
        self.paths = paths
        self.user = user
        self.root = root

    def _host(self, index: int) -> Path:
        return self.dir / str(index)

    def settings(self) -> dict[str, Any]:
        """The member's read-only bind mounts (``container_config``'s ``extra``)."""
        return {"volumes": {str(self._host(i)): {"bind": p, "mode": "ro"} for i, p in enumerate(self.paths)}}

    def create(self) -> None:
        """Empty 0600 placeholders owned by the sandbox user."""
        if not self.paths:
            return
        self.dir.mkdir(mode=0o755)
        for i in range(len(self.paths)):
            fd = os.open(self._host(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            os.close(fd)
            if self.root:
                os.chown(self._host(i), *self.user)

    def fill(self, plan: SandboxPlan, credentials: ResolvedCredentials) -> None:
        """Write each file credential of ``plan`` into its placeholder, then make it 0400."""
        for c in plan.credentials:
            if c.kind != "file" or c.path is None:
                continue
            path = self._host(self.paths.index(c.path))
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(credentials.values[c.name])
                f.flush()
                os.fchmod(f.fileno(), 0o400)


class WarmMember:
    """A started sandbox in the pool (a :class:`~airlock.sandbox.PoolMember`)."""

    def __init__(self, sandbox: DockerInstance, files: LateFiles) -> None:
        self.sandbox = sandbox
        self.files = files

    async def healthy(self) -> bool:
        """Whether its runner still answers SERVING."""
        return await self.sandbox.healthy()

    async def destroy(self) -> None:
        """Remove the container, its control directory and placeholders."""
        await self.sandbox.teardown()

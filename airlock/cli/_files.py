"""Files on the host side of ``--in``, ``--out`` and ``jobs artifacts``.

``--in PATH``: a file is placed at the workspace's top as its own name, a directory as its
name with everything below it (regular files; a link to a file is read, a linked directory
is not entered and is reported). ``--out DIR`` / ``--download DIR``: each artifact is
written below DIR at its workspace path, never outside DIR (the paths come from the sandbox).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from airlock.policy import INPUT_CAPS, FileRefused, workspace_path

if TYPE_CHECKING:
    from airlock.jobs import StoredFile

__all__ = ["ArtifactSource", "fetch_artifacts", "read_inputs", "write_artifacts"]


class ArtifactSource(Protocol):
    """Where a job's artifacts are kept (the controller's service, or a client of its API)."""

    async def artifacts(self, job_id: str) -> Sequence[StoredFile]: ...

    async def artifact(self, job_id: str, path: str) -> bytes: ...


async def fetch_artifacts(
    source: ArtifactSource, job_id: str, directory: Path | None
) -> list[dict[str, Any]]:
    """The job's artifacts as rows (``path``, ``size``, ``sha256``, ``written``), each written
    below ``directory`` when one is given (``written``: where; None otherwise).

    Raises:
        FileRefused: as :func:`write_artifacts`.
    """
    found = await source.artifacts(job_id)
    rows: list[dict[str, Any]] = [
        {"path": a.path, "size": a.size, "sha256": a.sha256, "written": None} for a in found
    ]
    if directory is not None:
        contents = [(a.path, await source.artifact(job_id, a.path)) for a in found]
        written = await asyncio.to_thread(write_artifacts, directory, contents)
        for row, path in zip(rows, written, strict=True):
            row["written"] = str(path)
    return rows


def _regular(path: Path) -> bytes:
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"--in {path}: not a regular file or directory")
    if info.st_size > INPUT_CAPS.max_file_bytes:
        raise FileRefused(
            f"--in {path}: {info.st_size} bytes, more than the cap of {INPUT_CAPS.max_file_bytes} bytes"
        )
    return path.read_bytes()


def read_inputs(paths: Iterable[Path]) -> list[tuple[str, bytes]]:
    """The files ``--in`` names, as ``(workspace path, content)``. Blocks (call in a thread).

    Raises:
        FileRefused: a path that does not exist or is not a file or directory, a linked
            directory inside one, or more than the input caps (checked as files are read).
    """
    files: list[tuple[str, bytes]] = []
    for given in paths:
        if not given.exists():
            raise FileRefused(f"--in {given}: no such file or directory")
        name = given.resolve().name
        if not given.is_dir():
            files.append((workspace_path(name), _regular(given)))
            continue
        for root, dirs, names in os.walk(given):
            here = Path(root)
            for d in dirs:
                if (here / d).is_symlink():
                    raise FileRefused(f"--in {here / d}: a linked directory inside {given} (not followed)")
            for entry in sorted(names):
                relative = (here / entry).relative_to(given).as_posix()
                files.append((workspace_path(f"{name}/{relative}"), _regular(here / entry)))
                if len(files) > INPUT_CAPS.max_files:
                    raise FileRefused(f"--in: more than the cap of {INPUT_CAPS.max_files} files")
    INPUT_CAPS.check({p: len(d) for p, d in files}, "--in files")
    return files


def write_artifacts(directory: Path, files: Iterable[tuple[str, bytes]]) -> list[Path]:
    """Write each artifact below ``directory`` (created); the paths written. Blocks.

    Raises:
        FileRefused: an artifact path that is not confined, or that would land outside
            ``directory`` through a link already there.
    """
    root = directory.resolve()
    written = []
    for path, data in files:
        target = root / workspace_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(root) or target.is_symlink():
            raise FileRefused(f"artifact {path}: {target} would lie outside {root} (a link is in the way)")
        target.write_bytes(data)
        written.append(target)
    return written

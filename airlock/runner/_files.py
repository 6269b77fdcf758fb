"""Files in and out of the runner's workspace, confined to it.

Every path is resolved one directory at a time from the workspace's own descriptor with
``O_NOFOLLOW``: a symbolic link the agent planted (``out -> /etc``) is never followed, neither
to write an input file nor to read an artifact. Only regular files are read; a FIFO or a device
is reported, never opened for reading. These functions block: call them in a thread.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from airlock.policy import FileCaps, FileRefused, FilesOverCap, matches, workspace_path

__all__ = [
    "SKIPPED_SPECIAL",
    "SKIPPED_SYMLINK",
    "collect",
    "open_confined_dir",
    "read_artifact",
    "write_file",
    "write_files",
]

#: Why a matching path is not collected: a symbolic link, or not a regular file.
SKIPPED_SYMLINK = "a symbolic link (never followed)"
SKIPPED_SPECIAL = "not a regular file"

#: Entries the artifact walk visits at most (a workspace of millions of files is refused).
MAX_WALKED = 100_000

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextmanager
def _fd(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _open_dir(workspace: Path, parts: list[str], *, create: bool, shown: str) -> int:
    """A descriptor of the directory ``parts`` below the workspace, never through a link."""
    fd = os.open(workspace, _DIR_FLAGS)
    try:
        for part in parts:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise FileRefused(
                        f"{shown}: {part!r} on its way is a symbolic link or not a directory"
                    ) from e
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_confined_dir(workspace: Path, parts: list[str], *, shown: str) -> int:
    """A descriptor of the existing directory ``parts`` below the workspace, opened one part at
    a time with ``O_NOFOLLOW`` (the caller closes it).

    Raises:
        FileRefused: a symbolic link or non-directory on the way.
    """
    return _open_dir(workspace, parts, create=False, shown=shown)


def write_files(workspace: Path, files: list[tuple[str, bytes]]) -> None:
    """Write each ``(path, data)`` below ``workspace`` (replacing a regular file there).

    Raises:
        FileRefused: a path that is not confined to the workspace, or a symbolic link,
            directory or special file in the way.
    """
    for path, data in files:
        write_file(workspace, path, data)


def write_file(workspace: Path, path: str, data: bytes, *, executable: bool = False) -> os.stat_result:
    """Write ``data`` to ``path`` below ``workspace`` (mode 0755 when ``executable``, else
    0644), as :func:`write_files`; returns the file's stat as written.

    Raises:
        FileRefused: as :func:`write_files`.
    """
    parts = workspace_path(path).split("/")
    mode = 0o755 if executable else 0o644
    with _fd(_open_dir(workspace, parts[:-1], create=True, shown=path)) as parent:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags, mode, dir_fd=parent)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise FileRefused(f"{path}: a symbolic link, directory or FIFO is in the way") from e
            raise
        with _fd(fd):
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileRefused(f"{path}: something other than a regular file is in the way")
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if executable:
                os.fchmod(fd, mode)
            return os.fstat(fd)


def collect(
    workspace: Path, globs: list[str], caps: FileCaps
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The regular files below ``workspace`` matching ``globs`` with their sizes, and the
    matches skipped with why (symbolic links, special files). Directories that are links are
    not entered.

    Raises:
        FileRefused: the matches exceed ``caps``, or the workspace holds more than
            ``MAX_WALKED`` entries.
    """
    found: dict[str, int] = {}
    skipped: list[tuple[str, str]] = []
    walked = 0
    stack = [""]
    while stack:
        prefix = stack.pop()
        with os.scandir(workspace / prefix if prefix else workspace) as entries:
            for entry in entries:
                walked += 1
                if walked > MAX_WALKED:
                    raise FilesOverCap(
                        f"artifacts refused: the workspace holds more than {MAX_WALKED} entries"
                    )
                rel = f"{prefix}{entry.name}"
                if entry.is_symlink():
                    if matches(rel, globs):
                        skipped.append((rel, SKIPPED_SYMLINK))
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel + "/")
                    continue
                if not matches(rel, globs):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    found[rel] = info.st_size
                else:
                    skipped.append((rel, SKIPPED_SPECIAL))
    caps.check(found, "artifacts")
    return dict(sorted(found.items())), sorted(skipped)


def read_artifact(workspace: Path, path: str, max_bytes: int) -> bytes:
    """The content of the regular file ``path`` below ``workspace``.

    Raises:
        FileRefused: the path is not confined, is no longer a regular file, or grew past
            ``max_bytes``.
    """
    parts = workspace_path(path).split("/")
    with _fd(_open_dir(workspace, parts[:-1], create=False, shown=path)) as parent:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        except OSError as e:
            raise FileRefused(
                f"{path}: cannot be read as a regular file ({os.strerror(e.errno or 0)})"
            ) from e
        with _fd(fd):
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileRefused(f"{path}: is no longer a regular file")
            chunks, size = [], 0
            while chunk := os.read(fd, 1024 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise FilesOverCap(f"artifacts refused: {path} grew past the cap of {max_bytes} bytes")
                chunks.append(chunk)
    return b"".join(chunks)

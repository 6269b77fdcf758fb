"""Files crossing the workspace boundary of a sandbox: the paths they may have, the output
globs they must match, and the caps they must fit.

The runner applies these rules inside the sandbox (it writes a job's input files and collects
its artifacts); the controller applies them again to what comes back, since the sandbox is
untrusted. A path is always relative to the workspace, ``/``-separated, without ``..``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from airlock.errors import AirlockError

__all__ = ["INPUT_CAPS", "FileCaps", "FileRefused", "FilesOverCap", "matches", "workspace_path"]

#: The longest workspace path accepted, and the longest part of one.
MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255


class FileRefused(AirlockError):
    """A file (or a set of files) that may not cross the workspace boundary; says why."""


class FilesOverCap(FileRefused):
    """A set of files beyond a cap of :class:`FileCaps` (refused whole, never cut)."""


def workspace_path(path: str) -> str:
    """``path`` normalised (``a//b/./c`` → ``a/b/c``), or FileRefused: absolute, ``..``, empty,
    a NUL or backslash, a part longer than 255 or a path longer than 1024 characters."""
    shown = repr(path[:200])
    if not path or "\x00" in path or "\\" in path:
        raise FileRefused(f"file path {shown} is empty or holds a NUL byte or backslash")
    if path.startswith("/"):
        raise FileRefused(f"file path {shown} is absolute; paths are relative to the workspace")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileRefused(f"file path {shown} leaves the workspace ('..')")
    if not parts:
        raise FileRefused(f"file path {shown} names the workspace itself, not a file in it")
    if len(path) > MAX_PATH_CHARS or any(len(p) > MAX_NAME_CHARS for p in parts):
        raise FileRefused(f"file path {shown} is too long (at most {MAX_PATH_CHARS} characters)")
    return "/".join(parts)


@lru_cache(maxsize=256)
def _pattern(glob: str) -> re.Pattern[str]:
    """A glob as a regex over a whole path: ``**`` spans directories (``a/**`` is everything
    below ``a``; ``**/x`` is ``x`` at any depth), ``*`` and ``?`` stay within one part."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out))


def matches(path: str, globs: Iterable[str]) -> bool:
    """Whether the workspace path ``path`` matches one of ``globs``."""
    return any(_pattern(glob).fullmatch(path) for glob in globs)


class FileCaps(BaseModel):
    """How many files, and how many bytes, may cross at once."""

    model_config = ConfigDict(frozen=True)

    max_files: int = Field(gt=0)
    max_file_bytes: int = Field(gt=0)
    max_total_bytes: int = Field(gt=0)

    def check(self, sizes: Mapping[str, int], what: str) -> None:
        """Refuse the whole set when it exceeds a cap (never a silent cut).

        Raises:
            FilesOverCap: naming ``what`` ("artifacts", "input files"), the cap and the count.
        """
        if len(sizes) > self.max_files:
            raise FilesOverCap(f"{what} refused: {len(sizes)} files, more than the cap of {self.max_files}")
        for path, size in sizes.items():
            if size > self.max_file_bytes:
                raise FilesOverCap(
                    f"{what} refused: {path} has {size} bytes, more than the cap of "
                    f"{self.max_file_bytes} bytes a file"
                )
        total = sum(sizes.values())
        if total > self.max_total_bytes:
            raise FilesOverCap(
                f"{what} refused: {total} bytes in all, more than the cap of {self.max_total_bytes} bytes"
            )


#: What one job may hand its sandbox (it crosses the controller's API in one message).
INPUT_CAPS = FileCaps(max_files=200, max_file_bytes=8 * 1024 * 1024, max_total_bytes=8 * 1024 * 1024)

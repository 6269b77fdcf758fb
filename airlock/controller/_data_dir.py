"""The controller's data directory, private to its user: session histories, memory, the job
store, the bearer token and the audit key live there (``airlock serve`` and ``airlock run``).

The directory is created 0700 and what airlock writes in it is created 0600: the SQLite
stores create their file 0600 before SQLite opens it (SQLite gives its ``-wal``, ``-shm`` and
journal files the main file's mode), the token and the key are created 0600. What is already
there keeps its mode (it may be someone's choice): each entry that others may read, write or
enter is named in a WARNING with the command that makes it private.
"""

from __future__ import annotations

import logging
import os
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "open_data_dir", "too_open"]

#: The modes airlock gives what it creates in the data directory.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_OTHERS = 0o077

_log = logging.getLogger("airlock.controller")


def open_data_dir(path: Path) -> Path:
    """``path``, created 0700 if absent (blocking: call it in a thread); logs a WARNING for
    ``path`` itself and each entry under it that others may use (group or other bits)."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    for entry, mode in too_open(path):
        fix = "700" if stat.S_ISDIR(mode) else "600"
        _log.warning(
            "%s in the controller's data directory is mode %s, open to other users (it may hold "
            "session histories, memory or secrets); make it private: chmod %s %s",
            entry,
            f"{stat.S_IMODE(mode):04o}",
            fix,
            shlex.quote(str(entry)),
        )
    return path


def too_open(root: Path) -> Iterator[tuple[Path, int]]:
    """``root`` and every file and directory below it (symbolic links not followed) with a
    group or other permission bit, with its ``st_mode``."""
    try:
        mode = os.stat(root).st_mode
    except OSError:
        return
    if mode & _OTHERS:
        yield root, mode
    for folder, dirs, files in os.walk(root):
        for name in sorted([*dirs, *files]):
            entry = Path(folder, name)
            try:
                mode = os.lstat(entry).st_mode
            except OSError:  # gone meanwhile
                continue
            if not stat.S_ISLNK(mode) and mode & _OTHERS:
                yield entry, mode

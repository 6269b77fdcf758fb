"""The bearer token read from a file that may change while the controller serves (a mounted
Kubernetes Secret rotated by GitOps or by hand): the check uses the file's current content.

Each check looks at the file's status (inode, size, modification time: one ``stat``, in a
thread) and reads it again only when that changed. A Secret volume swaps its files atomically,
so a read never sees half a token. A file that becomes unreadable or empty keeps the last good
token (with a warning) rather than refusing every client or accepting none.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from ._grpc import ControllerServerError, read_token_file

__all__ = ["TokenFile"]

_log = logging.getLogger("airlock.controller")


class TokenFile:
    """The token in ``path``, read again whenever the file changes; ``await token_file()``."""

    def __init__(self, path: Path) -> None:
        """Read the token now.

        Raises:
            ControllerServerError: the file is missing, unreadable or empty.
        """
        self.path = path
        self._seen = self._status()
        self._token = read_token_file(path)

    @property
    def token(self) -> str:
        """The token last read (never logged)."""
        return self._token

    def __repr__(self) -> str:  # never show the token
        return f"TokenFile({str(self.path)!r})"

    async def __call__(self) -> str:
        """The current token: the file's content if it changed since the last read."""
        return await asyncio.to_thread(self._current)

    def _current(self) -> str:
        status = self._status()
        if status == self._seen:
            return self._token
        try:
            token = read_token_file(self.path)
        except ControllerServerError as e:
            self._seen = status  # warned once per change, not on every call
            _log.warning("keeping the previous bearer token: %s", e)
            return self._token
        self._seen, self._token = status, token
        _log.info("bearer token reloaded from %s", self.path)
        return token

    def _status(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

"""FsStore: scopes as directories, one JSON file per key, atomic writes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from layer0 import Scope, SearchResult, StateError

from ._codec import check_key, check_prefix, decode_value, encode_value
from ._search import rank

_FILE_SUFFIX = ".json"
_DIR_SUFFIX = ".d"
_NAME_MAX = 255


def _encode(part: str, suffix: str) -> str:
    name = quote(part, safe="") + suffix
    if len(name.encode()) > _NAME_MAX:
        raise StateError.serialization(f"path segment too long once encoded ({len(name)} > {_NAME_MAX})")
    return name


def _key_segments(key: str) -> _Keys:
    """Split a key on ``/``; reject anything that could leave the scope directory."""
    check_key(key)
    if key.startswith(("/", "\\")):
        raise StateError.serialization(f"a key must be relative, not an absolute path: {key!r}")
    if "\\" in key:
        raise StateError.serialization(f"a key must not contain a backslash: {key!r}")
    segments = key.split("/")
    for seg in segments:
        if seg in ("", ".", ".."):
            raise StateError.serialization(f"a key must not contain empty, '.' or '..' segments: {key!r}")
    return segments


# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]


class FsStore:
    """A ``layer0.StateStore`` on the filesystem; plain files you can inspect.

    Layout: ``root/<scope kind>/<id>.d/…/<key>.json``. Scope ids and key segments
    are percent-encoded, so no id or key can name a path outside its scope; a key's
    ``/`` separates sub-directories (``notes/today`` → ``notes.d/today.json``).
    Keys that are absolute, contain ``..``, ``.``, empty segments, backslashes or
    NUL are rejected with ``StateError.serialization``.

    Writes go to a temporary file in the target directory and are moved into place
    with ``os.replace``, so readers see the old or the new value, never a partial
    one. All filesystem work runs in worker threads (``asyncio.to_thread``).
    Names are case-sensitive: use a case-sensitive filesystem.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root).resolve()

    @property
    def root(self) -> Path:
        """The directory holding every scope."""
        return self._root

    def _scope_dir(self, scope: Scope) -> Path:
        kind, *ids = scope.path_parts()
        return self._root.joinpath(kind, *(_encode(i, _DIR_SUFFIX) for i in ids))

    def _file(self, scope: Scope, key: str) -> Path:
        *dirs, name = _key_segments(key)
        path = self._scope_dir(scope).joinpath(
            *(_encode(d, _DIR_SUFFIX) for d in dirs), _encode(name, _FILE_SUFFIX)
        )
        # Defence in depth: the encoding above cannot produce a path outside the root.
        if os.path.commonpath([self._root, path]) != str(self._root):
            raise StateError.serialization(f"key {key!r} escapes the store root")
        return path

    # -- blocking helpers, run in threads --------------------------------------------

    @staticmethod
    def _read_file(path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    @staticmethod
    def _write_file(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    @staticmethod
    def _delete_file(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    @staticmethod
    def _walk(directory: Path, prefix: str = "") -> Iterator[tuple[str, Path]]:
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            name = entry.name
            if name.endswith(_FILE_SUFFIX) and entry.is_file(follow_symlinks=False):
                yield prefix + unquote(name[: -len(_FILE_SUFFIX)]), Path(entry.path)
            elif name.endswith(_DIR_SUFFIX) and entry.is_dir(follow_symlinks=False):
                yield from FsStore._walk(Path(entry.path), prefix + unquote(name[: -len(_DIR_SUFFIX)]) + "/")

    def _list_sync(self, scope: Scope, prefix: str) -> _Keys:
        return sorted(k for k, _ in self._walk(self._scope_dir(scope)) if k.startswith(prefix))

    def _search_sync(self, scope: Scope, query: str, limit: int) -> _Results:
        def items() -> Iterator[tuple[str, str]]:
            for key, path in self._walk(self._scope_dir(scope)):
                text = self._read_file(path)
                if text is not None:
                    yield key, text

        return rank(items(), query, limit)

    # -- the protocol ------------------------------------------------------------------

    async def read(self, scope: Scope, key: str) -> Any | None:
        """The value under ``key``, or None."""
        path = self._file(scope, key)
        try:
            text = await asyncio.to_thread(self._read_file, path)
        except OSError as e:
            raise StateError.other(f"reading {key!r}: {e}") from e
        return None if text is None else decode_value(text)

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        """Create or overwrite ``key`` atomically. Raises ``StateError``."""
        path = self._file(scope, key)
        text = encode_value(value)
        try:
            await asyncio.to_thread(self._write_file, path, text)
        except OSError as e:
            raise StateError.write_failed(f"writing {key!r}: {e}") from e

    async def delete(self, scope: Scope, key: str) -> None:
        """Delete ``key``; a missing key is a no-op."""
        path = self._file(scope, key)
        try:
            await asyncio.to_thread(self._delete_file, path)
        except OSError as e:
            raise StateError.write_failed(f"deleting {key!r}: {e}") from e

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """Sorted keys starting with ``prefix`` (all keys for ``""``)."""
        check_prefix(prefix)
        try:
            return await asyncio.to_thread(self._list_sync, scope, prefix)
        except OSError as e:
            raise StateError.other(f"listing {scope}: {e}") from e

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """Keys whose JSON text contains the query's terms (case-insensitive), best first."""
        try:
            return await asyncio.to_thread(self._search_sync, scope, query, limit)
        except OSError as e:
            raise StateError.other(f"searching {scope}: {e}") from e

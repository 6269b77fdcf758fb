"""The port of workspace blob storage: file contents, content-addressed, per tenant.

A blob is one file's content, zlib-compressed, named by the SHA-256 of the plain bytes. A
tenant's blobs are shared by its jobs (the same file in two snapshots or two jobs is stored
once) and never by another tenant. Implementations: a directory on the controller's volume
(the default) and S3-compatible object storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

from airlock.errors import AirlockError

__all__ = ["BlobStore", "BlobStoreError", "DirBlobStore", "tenant_key"]


class BlobStore(Protocol):
    """Content-addressed blobs of each tenant (``sha256``: 64 lowercase hex digits)."""

    async def has(self, tenant: str, sha256: str) -> bool:
        """Whether the tenant holds the blob."""
        ...

    async def put(self, tenant: str, sha256: str, data: bytes) -> None:
        """Store ``data`` (the zlib-compressed content) under the name; idempotent, atomic
        (a reader never sees half a blob)."""
        ...

    async def get(self, tenant: str, sha256: str) -> bytes:
        """The zlib-compressed content (KeyError: the tenant holds no such blob)."""
        ...

    async def delete(self, tenant: str, sha256: str) -> None:
        """Remove the blob (absent: nothing happens)."""
        ...

    def names(self, tenant: str) -> AsyncIterator[tuple[str, float]]:
        """Every blob of the tenant with the time it was stored (seconds since the epoch)."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...


class BlobStoreError(AirlockError):
    """The blob store cannot be opened, read or written (the message says which and why)."""


_HEX = re.compile(r"^[0-9a-f]{64}$")


def _checked(sha256: str) -> str:
    if not _HEX.match(sha256):
        raise BlobStoreError(f"{sha256[:80]!r} is not a SHA-256 in hex")
    return sha256


def tenant_key(tenant: str) -> str:
    """A tenant's name as a path or key part that cannot climb or collide (hex of its UTF-8)."""
    return tenant.encode().hex() or "00"


class DirBlobStore:
    """Blobs as files under ``root``: ``<root>/<tenant hex>/sha256/<ab>/<hex>``, mode 0600,
    written to a temporary file, flushed and renamed (a reader never sees half a blob)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, tenant: str, sha256: str) -> Path:
        sha = _checked(sha256)
        return self.root / tenant_key(tenant) / "sha256" / sha[:2] / sha

    async def has(self, tenant: str, sha256: str) -> bool:
        return await asyncio.to_thread(self._path(tenant, sha256).is_file)

    async def put(self, tenant: str, sha256: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self._path(tenant, sha256), data)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        if path.is_file():
            return  # content-addressed: the same name holds the same bytes
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    async def get(self, tenant: str, sha256: str) -> bytes:
        path = self._path(tenant, sha256)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise KeyError(sha256) from None

    async def delete(self, tenant: str, sha256: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread(os.unlink, self._path(tenant, sha256))

    async def names(self, tenant: str) -> AsyncIterator[tuple[str, float]]:
        base = self.root / tenant_key(tenant) / "sha256"
        found = await asyncio.to_thread(self._listing, base)
        for item in found:
            yield item

    @staticmethod
    def _listing(base: Path) -> list[tuple[str, float]]:
        if not base.is_dir():
            return []
        return [(p.name, p.stat().st_mtime) for p in base.glob("??/*") if _HEX.match(p.name)]

    async def aclose(self) -> None:
        return None

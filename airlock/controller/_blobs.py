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
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

__all__ = ["BlobStore", "DirBlobStore", "check_name"]


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


def check_name(tenant: str, sha256: str) -> None:
    """Refuse a blob name that is not 64 lowercase hex digits, or an empty tenant."""
    if not tenant:
        raise ValueError("blob store: the tenant is empty")
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError(f"blob store: {sha256[:80]!r} is not a SHA-256 (64 lowercase hex digits)")


class DirBlobStore:
    """Blobs as files under ``root``: ``<root>/<tenant-hex>/sha256/<ab>/<hex>`` (mode 0600).

    The tenant's name is hex-encoded so no tenant name can reach outside its directory. A
    write goes to a temporary file in the same directory, is fsynced, then renamed over the
    name, so a reader sees the whole blob or none. All file I/O runs on a worker thread.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _tenant_dir(self, tenant: str) -> Path:
        return self.root / tenant.encode().hex() / "sha256"

    def _path(self, tenant: str, sha256: str) -> Path:
        check_name(tenant, sha256)
        return self._tenant_dir(tenant) / sha256[:2] / sha256

    async def has(self, tenant: str, sha256: str) -> bool:
        """Whether the tenant holds the blob."""
        return await asyncio.to_thread(self._path(tenant, sha256).is_file)

    async def put(self, tenant: str, sha256: str, data: bytes) -> None:
        """Store the blob atomically (tmp, fsync, rename)."""
        await asyncio.to_thread(_write_atomic, self._path(tenant, sha256), data)

    async def get(self, tenant: str, sha256: str) -> bytes:
        """The blob's compressed content (KeyError: absent)."""
        path = self._path(tenant, sha256)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise KeyError(f"tenant {tenant!r} holds no blob {sha256}") from None

    async def delete(self, tenant: str, sha256: str) -> None:
        """Remove the blob (absent: nothing happens)."""
        await asyncio.to_thread(self._path(tenant, sha256).unlink, True)

    async def names(self, tenant: str) -> AsyncIterator[tuple[str, float]]:
        """Every blob of the tenant and when it was stored."""
        for item in await asyncio.to_thread(_listing, self._tenant_dir(tenant)):
            yield item

    async def aclose(self) -> None:
        """Nothing to release."""


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _listing(base: Path) -> list[tuple[str, float]]:
    found: list[tuple[str, float]] = []
    if not base.is_dir():
        return found
    for shard in base.iterdir():
        if not shard.is_dir():
            continue
        for blob in shard.iterdir():
            if not blob.name.startswith(".tmp-"):
                with contextlib.suppress(FileNotFoundError):
                    found.append((blob.name, blob.stat().st_mtime))
    return found

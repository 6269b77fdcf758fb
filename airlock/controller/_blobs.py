"""The port of workspace blob storage: file contents, content-addressed, per tenant.

A blob is one file's content, zlib-compressed, named by the SHA-256 of the plain bytes. A
tenant's blobs are shared by its jobs (the same file in two snapshots or two jobs is stored
once) and never by another tenant. Implementations: a directory on the controller's volume
(the default) and S3-compatible object storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

__all__ = ["BlobStore"]


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

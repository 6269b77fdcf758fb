"""S3BlobStore: workspace blobs in S3-compatible object storage (boto3, imported lazily).

Keys are ``<prefix>/<tenant>/sha256/<hex>``. boto3's client is synchronous, so every call runs
on a worker thread. Replicas of a controller on PostgreSQL share one bucket (a directory store
on one replica's volume is not seen by the others).
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ._blobs import check_name

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3BlobStore"]


class S3BlobStore:
    """Blobs as objects of ``bucket`` under ``prefix``.

    Args:
        bucket: the bucket (it must exist).
        prefix: the key prefix (no leading or trailing ``/`` needed).
        endpoint_url: an S3-compatible endpoint (None: AWS).
        region: the region (None: boto3's default).
        client: a boto3 S3 client to use instead of making one.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        client: S3Client | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            boto3 = importlib.import_module("boto3")
            client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region)
        self._client: S3Client = client

    def _tenant_prefix(self, tenant: str) -> str:
        head = f"{self.prefix}/" if self.prefix else ""
        return f"{head}{quote(tenant, safe='')}/sha256/"

    def _key(self, tenant: str, sha256: str) -> str:
        check_name(tenant, sha256)
        return self._tenant_prefix(tenant) + sha256

    async def has(self, tenant: str, sha256: str) -> bool:
        """Whether the tenant holds the blob."""
        key = self._key(tenant, sha256)
        try:
            await asyncio.to_thread(self._client.head_object, Bucket=self.bucket, Key=key)
        except self._client.exceptions.ClientError as e:
            if _missing(e):
                return False
            raise
        return True

    async def put(self, tenant: str, sha256: str, data: bytes) -> None:
        """Store the blob (one PUT: S3 makes it visible whole or not at all)."""
        key = self._key(tenant, sha256)
        await asyncio.to_thread(self._client.put_object, Bucket=self.bucket, Key=key, Body=data)

    async def get(self, tenant: str, sha256: str) -> bytes:
        """The blob's compressed content (KeyError: absent)."""
        key = self._key(tenant, sha256)
        try:
            return await asyncio.to_thread(self._read, key)
        except self._client.exceptions.ClientError as e:
            if _missing(e):
                raise KeyError(f"tenant {tenant!r} holds no blob {sha256}") from None
            raise

    def _read(self, key: str) -> bytes:
        answer = self._client.get_object(Bucket=self.bucket, Key=key)
        body = answer["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()

    async def delete(self, tenant: str, sha256: str) -> None:
        """Remove the blob (absent: nothing happens)."""
        key = self._key(tenant, sha256)
        await asyncio.to_thread(self._client.delete_object, Bucket=self.bucket, Key=key)

    async def names(self, tenant: str) -> AsyncIterator[tuple[str, float]]:
        """Every blob of the tenant and when it was stored."""
        for item in await asyncio.to_thread(self._listing, self._tenant_prefix(tenant)):
            yield item

    def _listing(self, prefix: str) -> list[tuple[str, float]]:
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        found: list[tuple[str, float]] = []
        for page in pages:
            for obj in page.get("Contents", []):
                when: datetime.datetime = obj["LastModified"]
                found.append((obj["Key"][len(prefix) :], when.timestamp()))
        return found

    async def aclose(self) -> None:
        """Close the client's connections."""
        await asyncio.to_thread(self._client.close)


def _missing(error: Any) -> bool:
    code = str(error.response.get("Error", {}).get("Code", ""))
    return code in {"404", "NoSuchKey", "NotFound"}

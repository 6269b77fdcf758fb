"""Blobs in S3-compatible object storage, through boto3 (imported when used): one object per
blob, ``<prefix>/<tenant hex>/sha256/<hex>``. The client is synchronous; each call runs in a
worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ._blobs import BlobStoreError, tenant_key

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3BlobStore"]


class S3BlobStore:
    """Blobs of every tenant in one bucket under ``prefix``.

    Args:
        client: a boto3 S3 client (endpoint, region and credentials as configured for it).
        bucket: the bucket, which must exist.
        prefix: the keys' prefix ("" for none).
    """

    def __init__(self, client: S3Client, bucket: str, prefix: str = "") -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    @classmethod
    async def open(cls, url: str, *, endpoint_url: str | None = None) -> S3BlobStore:
        """The store ``s3://bucket/prefix`` names (its bucket checked now).

        Raises:
            BlobStoreError: boto3 is missing, the URL names no bucket, or the bucket cannot be read.
        """
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise BlobStoreError(f"blob store {url!r} names no bucket (s3://bucket/prefix)")
        try:
            import boto3
        except ImportError:
            raise BlobStoreError("the s3:// blob store needs boto3: pip install 'airlock[s3]'") from None
        client = await asyncio.to_thread(boto3.client, "s3", endpoint_url=endpoint_url)
        store = cls(client, bucket, prefix)
        try:
            await asyncio.to_thread(client.head_bucket, Bucket=bucket)
        except Exception as e:
            raise BlobStoreError(f"blob store {url}: the bucket cannot be read: {e}") from e
        return store

    def _key(self, tenant: str, sha256: str) -> str:
        parts = [self.prefix] if self.prefix else []
        return "/".join([*parts, tenant_key(tenant), "sha256", sha256])

    async def has(self, tenant: str, sha256: str) -> bool:
        try:
            await asyncio.to_thread(
                self._client.head_object, Bucket=self.bucket, Key=self._key(tenant, sha256)
            )
        except self._client.exceptions.ClientError as e:
            if _status(e) == 404:
                return False
            raise BlobStoreError(f"blob store: {e}") from e
        return True

    async def put(self, tenant: str, sha256: str, data: bytes) -> None:
        key = self._key(tenant, sha256)
        await asyncio.to_thread(self._client.put_object, Bucket=self.bucket, Key=key, Body=data)

    async def get(self, tenant: str, sha256: str) -> bytes:
        key = self._key(tenant, sha256)
        try:
            found = await asyncio.to_thread(self._client.get_object, Bucket=self.bucket, Key=key)
        except self._client.exceptions.NoSuchKey:
            raise KeyError(sha256) from None
        return await asyncio.to_thread(found["Body"].read)

    async def delete(self, tenant: str, sha256: str) -> None:
        key = self._key(tenant, sha256)
        await asyncio.to_thread(self._client.delete_object, Bucket=self.bucket, Key=key)

    async def names(self, tenant: str) -> AsyncIterator[tuple[str, float]]:
        prefix = self._key(tenant, "")
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        iterator = iter(pages)
        while (page := await asyncio.to_thread(next, iterator, None)) is not None:
            for item in page.get("Contents", []):
                yield item["Key"].rsplit("/", 1)[-1], item["LastModified"].timestamp()

    async def aclose(self) -> None:
        await asyncio.to_thread(self._client.close)


def _status(error: Any) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))

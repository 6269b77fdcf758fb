"""open_blob_store: the blob store a setting names (a directory, or an S3 bucket)."""

from __future__ import annotations

import os
from pathlib import Path

from ._blobs import BlobStore, DirBlobStore
from ._blobs_s3 import S3BlobStore

__all__ = ["open_blob_store"]


def open_blob_store(spec: str, data_dir: str | Path, endpoint_url: str | None = None) -> BlobStore:
    """The blob store ``spec`` names: ``dir`` (``<data_dir>/blobs``), ``dir:PATH``, or
    ``s3://bucket/prefix`` (endpoint: ``endpoint_url`` or ``AIRLOCK_S3_ENDPOINT``)."""
    if spec == "dir":
        return DirBlobStore(Path(data_dir) / "blobs")
    if spec.startswith("dir:") and len(spec) > 4:
        return DirBlobStore(spec[4:])
    if spec.startswith("s3://"):
        bucket, _, prefix = spec[5:].partition("/")
        if not bucket:
            raise ValueError(f"blob store {spec!r}: no bucket (expected s3://bucket/prefix)")
        endpoint = endpoint_url or os.environ.get("AIRLOCK_S3_ENDPOINT") or None
        return S3BlobStore(bucket, prefix, endpoint_url=endpoint)
    raise ValueError(f"blob store {spec!r}: expected dir, dir:PATH or s3://bucket/prefix")

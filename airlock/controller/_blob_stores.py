"""Opening the blob store ``airlock serve --blob-store`` names."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from ._blobs import BlobStore, BlobStoreError, DirBlobStore
from ._blobs_s3 import S3BlobStore

__all__ = ["open_blob_store"]


def _made_root(spec: str, data_dir: Path) -> Path:
    root = Path(spec[4:]).expanduser() if spec.startswith("dir:") else data_dir / "blobs"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root.absolute()


async def open_blob_store(spec: str, data_dir: Path) -> BlobStore:
    """The blob store ``spec`` names: ``dir`` (``data_dir/blobs``), ``dir:PATH``, or
    ``s3://bucket/prefix`` (endpoint: ``$AIRLOCK_S3_ENDPOINT``; credentials and region: the
    standard AWS variables and files).

    Raises:
        BlobStoreError: an unknown kind, or a store that cannot be opened.
    """
    if spec == "dir" or spec.startswith("dir:"):
        return DirBlobStore(await asyncio.to_thread(_made_root, spec, data_dir))
    if spec.startswith("s3://"):
        return await S3BlobStore.open(spec, endpoint_url=os.environ.get("AIRLOCK_S3_ENDPOINT") or None)
    raise BlobStoreError(f"blob store {spec!r}: expected dir, dir:PATH, s3://bucket/prefix or off")

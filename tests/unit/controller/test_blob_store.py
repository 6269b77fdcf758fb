"""The BlobStore contract over the directory store and the S3 store (against a local S3
server: moto's, started by the tests on 127.0.0.1), and opening the one ``--blob-store`` names."""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.controller._blob_stores import open_blob_store
from airlock.controller._blobs import BlobStore, BlobStoreError, DirBlobStore
from airlock.controller._blobs_s3 import S3BlobStore
from airlock.policy import sha256_hex
from tests.support.s3 import S3_ENV, new_bucket, s3_client, s3_endpoint

__all__ = ["s3_endpoint"]


@pytest.fixture(params=["dir", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    if request.param == "dir":
        blobs: BlobStore = DirBlobStore(tmp_path / "blobs")
    else:
        client = s3_client(request.getfixturevalue("s3_endpoint"))
        blobs = S3BlobStore(client, new_bucket(client), "airlock/ws")
    yield blobs
    await blobs.aclose()


def _blob(text: bytes) -> tuple[str, bytes]:
    return sha256_hex(text), zlib.compress(text)


async def test_a_blob_is_put_once_read_back_and_deleted(store: BlobStore) -> None:
    sha, data = _blob(b"hello")
    assert not await store.has("acme", sha)
    await store.put("acme", sha, data)
    await store.put("acme", sha, data)  # idempotent
    assert await store.has("acme", sha)
    assert zlib.decompress(await store.get("acme", sha)) == b"hello"
    await store.delete("acme", sha)
    await store.delete("acme", sha)
    assert not await store.has("acme", sha)
    with pytest.raises(KeyError):
        await store.get("acme", sha)


async def test_one_tenant_never_reads_anothers_blob(store: BlobStore) -> None:
    sha, data = _blob(b"secret")
    await store.put("acme", sha, data)
    assert not await store.has("other", sha)
    with pytest.raises(KeyError):
        await store.get("other", sha)
    assert [n async for n in store.names("other")] == []
    names = [n async for n in store.names("acme")]
    assert [n for n, _ in names] == [sha] and names[0][1] > 0


async def test_a_name_that_is_not_a_sha256_is_refused(tmp_path: Path) -> None:
    blobs = DirBlobStore(tmp_path)
    for bad in ("../" + "a" * 61, "A" * 64, "a" * 63, ""):
        with pytest.raises(BlobStoreError, match="SHA-256"):
            await blobs.put("acme", bad, b"x")
    assert os.listdir(tmp_path) == []


async def test_the_directory_store_writes_private_whole_files_under_a_tenant_it_cannot_climb_out_of(
    tmp_path: Path,
) -> None:
    blobs = DirBlobStore(tmp_path)
    sha, data = _blob(b"x")
    await blobs.put("../evil", sha, data)
    path = tmp_path / b"../evil".hex() / "sha256" / sha[:2] / sha
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [sha], "no temporary file left"


async def test_the_blob_store_is_opened_as_named(
    tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_blob_store("dir", tmp_path)
    assert isinstance(store, DirBlobStore) and store.root == tmp_path / "blobs"
    other = await open_blob_store(f"dir:{tmp_path / 'elsewhere'}", tmp_path)
    assert isinstance(other, DirBlobStore) and (tmp_path / "elsewhere").is_dir()
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AIRLOCK_S3_ENDPOINT", s3_endpoint)
    bucket = new_bucket(s3_client(s3_endpoint))
    s3 = await open_blob_store(f"s3://{bucket}/some/prefix", tmp_path)
    assert isinstance(s3, S3BlobStore) and (s3.bucket, s3.prefix) == (bucket, "some/prefix")
    await s3.aclose()
    with pytest.raises(BlobStoreError, match="cannot be read"):
        await open_blob_store("s3://no-such-bucket/x", tmp_path)
    for bad in ("s3://", "ftp://x", "nfs"):
        with pytest.raises(BlobStoreError, match="blob store"):
            await open_blob_store(bad, tmp_path)

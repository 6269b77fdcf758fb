"""The BlobStore contract, over the directory store and the S3 store (against moto's server,
started here on 127.0.0.1 from ``.venv-moto``)."""

from __future__ import annotations

import stat
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from airlock.controller._blobs import BlobStore, DirBlobStore
from airlock.controller._blobs_open import open_blob_store
from airlock.controller._blobs_s3 import S3BlobStore
from airlock.policy import sha256_hex
from tests.support.s3 import moto_server, new_bucket, s3_client


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto S3 server on a free local port (skipped without .venv-moto unless AIRLOCK_REQUIRE_S3=1)."""
    yield from moto_server()


@pytest.fixture(params=["dir", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    if request.param == "dir":
        blobs: BlobStore = DirBlobStore(tmp_path / "blobs")
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        client = s3_client(endpoint)
        bucket = new_bucket(client)
        blobs = S3BlobStore(bucket, "airlock/ws", client=client)
    yield blobs
    await blobs.aclose()


def _blob(text: bytes) -> tuple[str, bytes]:
    return sha256_hex(text), zlib.compress(text)


async def test_put_get_has_delete(store: BlobStore) -> None:
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


async def test_tenants_are_apart(store: BlobStore) -> None:
    sha, data = _blob(b"secret")
    await store.put("acme", sha, data)
    assert not await store.has("other", sha)
    with pytest.raises(KeyError):
        await store.get("other", sha)
    assert [n for n, _ in [x async for x in store.names("other")]] == []
    names = [x async for x in store.names("acme")]
    assert [n for n, _ in names] == [sha]
    assert names[0][1] > 0


async def test_bad_names_are_refused(store: BlobStore) -> None:
    for bad in ("../" + "a" * 61, "A" * 64, "a" * 63, ""):
        with pytest.raises(ValueError, match="SHA-256"):
            await store.put("acme", bad, b"x")


async def test_dir_store_layout(tmp_path: Path) -> None:
    blobs = DirBlobStore(tmp_path)
    sha, data = _blob(b"x")
    await blobs.put("../evil", sha, data)
    path = tmp_path / b"../evil".hex() / "sha256" / sha[:2] / sha
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [sha]  # no temporary file left


def test_open_blob_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_blob_store("dir", tmp_path)
    assert isinstance(store, DirBlobStore) and store.root == tmp_path / "blobs"
    other = open_blob_store("dir:/srv/blobs", tmp_path)
    assert isinstance(other, DirBlobStore) and other.root == Path("/srv/blobs")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AIRLOCK_S3_ENDPOINT", "http://127.0.0.1:9")
    s3 = open_blob_store("s3://bucket/some/prefix", tmp_path)
    assert isinstance(s3, S3BlobStore) and (s3.bucket, s3.prefix) == ("bucket", "some/prefix")
    assert s3._client.meta.endpoint_url == "http://127.0.0.1:9"
    for bad in ("s3://", "ftp://x", "dir:"):
        with pytest.raises(ValueError, match="blob store"):
            open_blob_store(bad, tmp_path)

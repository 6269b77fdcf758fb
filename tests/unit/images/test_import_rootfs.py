"""The public offline-recipe pieces of airlock.images: importing a directory as an image (against a
stand-in engine client: neither root nor Docker needed)."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import airlock.images as images
from airlock.errors import ImageError


class FakeApi:
    """Records what ``import_image`` was given; ``inspect_image`` answers for imported tags."""

    def __init__(self, *, fail: bool = False, keep: bool = True) -> None:
        self.fail, self.keep = fail, keep
        self.received = b""
        self.calls: list[dict[str, Any]] = []
        self.tags: set[str] = set()

    def import_image(self, *, src: Iterable[bytes], repository: str, tag: str, **kw: Any) -> None:
        from docker.errors import APIError

        if self.fail:
            raise APIError("import refused")
        self.received = b"".join(src)
        self.calls.append({"repository": repository, "tag": tag, **kw})
        if self.keep:
            self.tags.add(f"{repository}:{tag}")

    def inspect_image(self, tag: str) -> dict[str, Any]:
        from docker.errors import ImageNotFound

        if tag not in self.tags:
            raise ImageNotFound(tag)
        return {"Id": "sha256:" + "ab" * 32, "Size": len(self.received)}


class FakeClient:
    def __init__(self, api: FakeApi) -> None:
        self.api = api


def test_offline_recipe_pieces_are_public() -> None:
    for name in ("resolve_closure", "download_debs", "unpack_rootfs", "closure_key", "import_rootfs"):
        assert name in images.__all__ and callable(getattr(images, name))


def test_import_rootfs_streams_the_tree_with_numeric_owners(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hello").write_text("hi\n")
    api = FakeApi()
    changes = ["USER 999:999", 'LABEL a="b"']

    image_id = images.import_rootfs(FakeClient(api), root, "some-image:15", changes)

    assert image_id == "sha256:" + "ab" * 32
    assert api.calls == [{"repository": "some-image", "tag": "15", "changes": changes, "stream_src": True}]
    with tarfile.open(fileobj=io.BytesIO(api.received)) as tar:
        member = tar.getmember("./etc/hello")
        assert tar.extractfile(member).read() == b"hi\n"  # type: ignore[union-attr]
        assert (member.uid, member.uname) == (os.getuid(), "")  # numeric owners only


def test_import_rootfs_failures_are_image_errors(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with pytest.raises(ImageError, match="docker import of x:1 failed"):
        images.import_rootfs(FakeClient(FakeApi(fail=True)), tmp_path / "root", "x:1", [])
    with pytest.raises(ImageError, match="x:1 does not exist"):
        images.import_rootfs(FakeClient(FakeApi(keep=False)), tmp_path / "root", "x:1", [])
    with pytest.raises(ImageError, match="tar of the rootfs failed"):
        images.import_rootfs(FakeClient(FakeApi()), tmp_path / "missing", "x:1", [])

"""The workspace manifest: digests name content, increments apply, bad trees are refused."""

from __future__ import annotations

import pytest

from airlock.policy import (
    EMPTY_MANIFEST,
    ManifestEntry,
    ManifestRefused,
    WorkspaceManifest,
    sha256_hex,
)


def _entry(path: str, data: bytes = b"x", executable: bool = False) -> ManifestEntry:
    return ManifestEntry(path=path, sha256=sha256_hex(data), size=len(data), executable=executable)


def test_the_digest_names_the_content_not_the_order() -> None:
    one = WorkspaceManifest.of([_entry("b"), _entry("a/c", b"yy")])
    two = WorkspaceManifest.of([_entry("a/c", b"yy"), _entry("b")])
    assert one.digest == two.digest != EMPTY_MANIFEST.digest
    assert [e.path for e in one.entries] == ["a/c", "b"]
    assert (one.files, one.total_bytes) == (2, 3)
    assert WorkspaceManifest.from_json(one.to_json()) == one


def test_an_increment_applies_and_its_diff_round_trips() -> None:
    before = WorkspaceManifest.of([_entry("keep"), _entry("gone"), _entry("edit", b"1")])
    after = before.apply([_entry("edit", b"2"), _entry("new/file")], ["gone"])
    assert sorted(after.by_path()) == ["edit", "keep", "new/file"]
    changed, deleted = before.diff(after)
    assert before.apply(changed, deleted).digest == after.digest
    assert deleted == ["gone"]
    assert after.apply([_entry("x", executable=True)], []).digest != after.apply([_entry("x")], []).digest


@pytest.mark.parametrize(
    ("changed", "deleted", "reason"),
    [
        ([_entry("a")], ["missing"], "is not in the workspace"),
        ([_entry("a")], ["a"], "both changed and deleted"),
        ([_entry("a"), _entry("a")], [], "listed twice"),
        ([_entry("dir"), _entry("dir/file")], [], "also a directory"),
        ([_entry("../escape")], [], "leaves the workspace"),
        ([_entry("/etc/passwd")], [], "absolute"),
        ([_entry("a//b")], [], "not normalised"),
    ],
)
def test_a_tree_no_workspace_can_hold_is_refused(
    changed: list[ManifestEntry], deleted: list[str], reason: str
) -> None:
    base = WorkspaceManifest.of([_entry("a")]) if deleted == ["a"] else EMPTY_MANIFEST
    with pytest.raises(ManifestRefused, match=reason):
        base.apply(changed, deleted)

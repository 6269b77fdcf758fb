"""The custom-tool gate's answer cache: it never decides an answer, only saves a check."""

from __future__ import annotations

import json
from pathlib import Path

from airlock.cli._tool_gate import ToolCheckCache


def test_an_answer_is_kept_by_image_agent_and_paths(tmp_path: Path) -> None:
    cache = ToolCheckCache(tmp_path / "data" / "tool-checks.json")
    key = ToolCheckCache.key("sha256:aa", "wc", ["m:f", "m:g"])
    assert cache.get(key) is None
    cache.put(key, ["f", "g"], [])
    assert cache.get(key) == (["f", "g"], [])
    assert cache.get(ToolCheckCache.key("sha256:bb", "wc", ["m:f", "m:g"])) is None  # a rebuilt image
    assert cache.get(ToolCheckCache.key("sha256:aa", "wc", ["m:f"])) is None  # other paths
    assert cache.get(ToolCheckCache.key("sha256:aa", "other", ["m:f", "m:g"])) is None
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700


def test_the_oldest_answers_go_first(tmp_path: Path) -> None:
    cache = ToolCheckCache(tmp_path / "tool-checks.json")
    keys = [ToolCheckCache.key(f"sha256:{i}", "wc", ["m:f"]) for i in range(70)]
    for key in keys:
        cache.put(key, ["f"], [])
    kept = json.loads(cache.path.read_text())
    assert len(kept) == 64 and list(kept) == keys[6:]
    cache.put(keys[10], [], ["now broken"])  # an answer given again moves to the newest
    assert list(json.loads(cache.path.read_text()))[-1] == keys[10]
    assert cache.get(keys[10]) == ([], ["now broken"])


def test_an_unreadable_or_foreign_file_is_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "tool-checks.json"
    cache = ToolCheckCache(path)
    key = ToolCheckCache.key("sha256:aa", "wc", ["m:f"])
    for text in ("{not json", "[1, 2]", json.dumps({key: "yes"}), json.dumps({key: {"tools": "f"}})):
        path.write_text(text)
        assert cache.get(key) is None
    path.write_text("{not json")
    cache.put(key, ["f"], [])  # a damaged file is replaced, not a failure
    assert cache.get(key) == (["f"], [])


def test_a_cache_that_cannot_be_written_costs_only_a_check(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = ToolCheckCache(blocker / "tool-checks.json")  # its directory cannot be made
    cache.put(ToolCheckCache.key("sha256:aa", "wc", ["m:f"]), ["f"], [])
    assert cache.get(ToolCheckCache.key("sha256:aa", "wc", ["m:f"])) is None

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


async def test_an_agent_whose_sandboxes_run_elsewhere_is_not_checked_against_a_local_image(
    tmp_path: Path,
) -> None:
    """A Kubernetes agent's image is the cluster's: this machine's runner image says nothing
    about it (its run reports a broken path at provisioning), so nothing here refuses it."""
    from airlock.cli._tool_gate import custom_tool_checks, refuse_broken_tools
    from airlock.config import load_config

    (tmp_path / "s.yaml").write_text("[]")
    (tmp_path / "airlock.yaml").write_text(
        "version: 1\n"
        "agents:\n"
        "  wc:\n"
        "    provider: {kind: scripted, script: s.yaml}\n"
        "    tools: [wordcount.tools:count_words]\n"
        "    backend: kubernetes\n"
    )
    agent = load_config(tmp_path / "airlock.yaml").agents["wc"]
    [check] = await custom_tool_checks([agent], ToolCheckCache(tmp_path / "cache.json"))
    assert check.status == "warning"
    assert check.message == "not checked here: backend kubernetes runs its sandboxes' images elsewhere"
    await refuse_broken_tools(agent, tmp_path)  # nothing to refuse
    assert not (tmp_path / "tool-checks.json").exists()


def test_the_docker_backend_names_the_image_its_sandboxes_run() -> None:
    from airlock.images import runner_image_tag
    from airlock.sandbox import backend
    from layer0 import ContainerIsolation, EnvironmentSpec

    local_image = backend("docker").local_image
    assert local_image is not None
    assert local_image(EnvironmentSpec()) == runner_image_tag()
    assert local_image(EnvironmentSpec(isolation=[ContainerIsolation(image="mine:1")])) == "mine:1"
    assert backend("kubernetes").local_image is None

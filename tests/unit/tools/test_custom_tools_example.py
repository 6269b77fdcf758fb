"""examples/custom_tools: its configuration loads, and its package's tools load and answer what
its recorded script says (the image build and the sandbox run: tests/integration)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from airlock.config import load_config
from airlock.tools import load_custom_tools
from airlock.turn import ToolContext
from layer0 import ContainerIsolation

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "custom_tools"
CTX = ToolContext(tool_use_id="t1")


@pytest.fixture
def example_package(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example's ``src`` on sys.path; its modules forgotten afterwards."""
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    yield
    for name in [m for m in sys.modules if m == "wordcount" or m.startswith("wordcount.")]:
        del sys.modules[name]


def test_the_example_configuration_names_the_image_and_the_import_paths() -> None:
    agent = load_config(EXAMPLE / "airlock.yaml").agent("wordcount")
    assert agent.spec.custom_tools == ["wordcount.tools:count_words", "wordcount.tools:top_words"]
    assert agent.environment.isolation == [ContainerIsolation(image="airlock-wordcount:0.1.0")]


async def test_the_example_tools_load_and_answer_what_the_script_says(example_package: None) -> None:
    count, top = load_custom_tools(
        ["wordcount.tools:count_words", "wordcount.tools:top_words"], agent="wordcount"
    )
    assert (count.name, top.name) == ("count_words", "top_words")
    assert count.input_schema["required"] == ["text"]
    assert top.input_schema["properties"]["n"] == {
        "type": "integer",
        "default": 3,
        "description": "how many words to list.",
    }
    script = yaml.safe_load((EXAMPLE / "script.yaml").read_text())
    call = script["steps"][0]["response"]["content"][0]
    assert call["name"] == "count_words"
    assert await count.call(call["input"], CTX) == {"words": 11, "distinct": 5, "lines": 1}
    assert "11 words, 5 of them distinct" in script["steps"][1]["response"]["content"][0]["text"]
    assert await top.call({"text": call["input"]["text"], "n": 2}, CTX) == [["the", 4], ["cat", 2]]

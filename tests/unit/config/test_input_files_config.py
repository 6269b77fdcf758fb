"""An agent's ``input_files:`` section stays with the controller (the runner never needs it),
defaults to announcing nothing, and every mistake names its key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.policy import InputFilesPolicy

Write = Callable[..., Path]
One = Callable[[Path], str]

AGENT = """\
agents:
  reader:
    provider: {kind: scripted, script: []}
    tools: [read_file]
"""


def test_the_section_reaches_the_agent_and_defaults_to_nothing(write: Write) -> None:
    agent = load_config(write(AGENT + "    input_files: {show: content, max_bytes: 4096}\n")).agent("reader")
    assert agent.input_files == InputFilesPolicy(show="content", max_bytes=4096)
    assert load_config(write(AGENT)).agent("reader").input_files.show == "none"


@pytest.mark.parametrize(
    ("section", "where", "what"),
    [
        ("input_files: {show: all}", "agents.reader.input_files.show", "content"),
        ("input_files: {max_bytes: 0}", "agents.reader.input_files.max_bytes", "1"),
        ("input_files: {show: names, limit: 3}", "agents.reader.input_files.limit", "unknown key"),
    ],
)
def test_each_mistake_names_its_key(
    write: Write, one_issue: One, section: str, where: str, what: str
) -> None:
    message = one_issue(write(AGENT + "    " + section + "\n"))
    assert f" {where}: " in message and what in message, message

"""Custom tools through a real runner (gRPC on loopback): the runner imports them when it
builds the turn; a path that does not import is refused as INVALID_ARGUMENT before any model
call, naming the agent and the path."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from airlock.runner import RemoteTurn
from airlock.testing import scripted_agent, text_step, tool_step
from airlock.turn import ToolFinished
from layer0 import ExitReason, TurnInput
from tests.support.refusals import refused_before_any_model_call

TOOLS = '''
def count_words(text: str) -> dict[str, int]:
    """Count the words of a text."""
    return {"words": len(text.split()), "chars": len(text)}
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh package on sys.path (the runner runs in this process) with a ``tools`` module."""
    name = f"rtpkg_{uuid.uuid4().hex[:10]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "tools.py").write_text(textwrap.dedent(TOOLS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


async def test_the_runner_runs_a_custom_tool(runner: tuple[str, str], package: str) -> None:
    address, token = runner
    path = f"{package}.tools:count_words"
    spec = scripted_agent(
        [
            tool_step("count_words", {"text": "the cat saw the dog"}, match={"tools": ["count_words"]}),
            text_step("5 words."),
        ],
        name="wc",
        tools=[path],
    )
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        output = await turn.execute(TurnInput.new("count them"), events=sink)
    assert output.exit_reason == ExitReason.complete()
    assert output.message.as_text() == "5 words."
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.success and json.loads(finished.output) == {"words": 5, "chars": 19}


async def test_a_broken_import_path_is_refused_before_any_model_call(
    runner: tuple[str, str], package: str
) -> None:
    spec = scripted_agent(
        [text_step("never played")],
        name="wc",
        tools=["calculator", f"{package}.tools:count_words", "wc_absent_pkg.tools:search"],
    )
    message = await refused_before_any_model_call(runner, spec)
    assert (
        "agent: agent 'wc': custom tool 'wc_absent_pkg.tools:search': module 'wc_absent_pkg' not found "
        "in the sandbox image" in message
    )

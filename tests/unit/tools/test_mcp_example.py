"""The example MCP server (examples/mcp): started over stdio as its agent declares it (here
with this interpreter and the example's source on its path), its tools and their risks, and
the example agent's script calling exactly what the server offers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from airlock.config import load_config
from airlock.errors import ToolError
from airlock.tools import open_mcp_tools
from airlock.turn import ToolContext, ToolRegistry

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp"
CTX = ToolContext(tool_use_id="t1")


async def test_the_example_agents_server_offers_what_its_script_calls(tmp_path: Path) -> None:
    agent = load_config(EXAMPLE / "airlock.yaml").agent("notes")
    (server,) = agent.spec.mcp_servers
    assert server.command == ["/opt/venv/bin/python", "-m", "notes_mcp"]  # the sandbox image's
    here = server.model_copy(
        update={"command": [sys.executable, "-m", "notes_mcp"], "env": {"PYTHONPATH": str(EXAMPLE / "src")}}
    )
    async with await open_mcp_tools([here], workspace=tmp_path) as opened:
        registry = ToolRegistry(opened.tools)
        assert registry.names() == ["notes.add_note", "notes.list_notes", "notes.read_note"]
        assert registry.risks("notes.add_note") == ("destructive",)
        assert registry.risks("notes.read_note") == ()
        script = yaml.safe_load((EXAMPLE / "script.yaml").read_text(encoding="utf-8"))
        assert script["steps"][0]["match"]["tools"] == registry.names()
        calls = [b for s in script["steps"] for b in s["response"]["content"] if b["type"] == "tool_use"]
        for call in calls:
            outcome = await registry.execute(call["name"], call["input"], CTX)
            assert not outcome.is_error, outcome
        assert outcome.content == '{"result": ["groceries"]}'
        read = await opened.tools[2].call({"title": "groceries"}, CTX)
        assert read == {"result": "milk, eggs, bread"}
        with pytest.raises(ToolError) as e:
            await opened.tools[2].call({"title": "../etc/passwd"}, CTX)
        assert "invalid title" in e.value.message
    assert (tmp_path / "notes" / "groceries.md").read_text() == "milk, eggs, bread"

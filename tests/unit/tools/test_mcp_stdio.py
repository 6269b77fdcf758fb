"""MCP tools from a real stdio server (tests/support/mcp_servers.py, the ``mcp`` SDK): listing,
calls, the allow-list, errors of every kind in bounded time, and nothing left running."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from airlock.errors import SpecError, ToolError
from airlock.spec import ApprovalGate, McpServerSpec
from airlock.tools import McpToolSet, open_mcp_tools
from airlock.turn import ToolContext, ToolDyn, ToolRegistry
from tests.support.mcp_servers import process_alive, process_gone, stdio_command

CTX = ToolContext(tool_use_id="t1")


def server(mode: str = "stdio", *args: str, **fields: object) -> McpServerSpec:
    return McpServerSpec.model_validate(
        {"name": "srv", "transport": "stdio", "command": stdio_command(mode, *args), **fields}
    )


def by_name(opened: McpToolSet) -> dict[str, ToolDyn]:
    return {t.name: t for t in opened.tools}


async def test_lists_each_tool_as_server_dot_tool_with_its_schema_and_description(tmp_path: Path) -> None:
    async with await open_mcp_tools([server()], workspace=tmp_path) as opened:
        tools = by_name(opened)
        assert opened.servers == ["srv"]
        assert list(tools) == [
            "srv.echo",
            "srv.add",
            "srv.fail",
            "srv.picture",
            "srv.where",
            "srv.spawn_child",
            "srv.crash",
            "srv.sleep",
        ]
        add = tools["srv.add"]
        assert add.description == "Add two integers."
        assert add.input_schema["type"] == "object"
        assert add.input_schema["required"] == ["a", "b"]
        assert add.input_schema["properties"]["a"]["type"] == "integer"
        # Risks: the MCP defaults, which echo lowers with its annotations; the approval gate
        # matches them by name glob and by risk, through the registry.
        registry = ToolRegistry(opened.tools)
        assert registry.risks("srv.echo") == ()
        assert registry.risks("srv.add") == ("destructive", "external")
        assert ApprovalGate(tools=["srv.*"]).needs("srv.echo", registry.risks("srv.echo"))
        assert ApprovalGate(risks=["destructive"]).needs("srv.add", registry.risks("srv.add"))
        assert not ApprovalGate(risks=["destructive"]).needs("srv.echo", registry.risks("srv.echo"))


async def test_calls_map_structured_text_and_image_results(tmp_path: Path) -> None:
    async with await open_mcp_tools([server()], workspace=tmp_path) as opened:
        tools = by_name(opened)
        assert await tools["srv.add"].call({"a": 17, "b": 23}, CTX) == {"result": 40}
        assert await tools["srv.echo"].call({"text": "héllo"}, CTX) == {"result": "héllo"}
        assert await tools["srv.picture"].call({}, CTX) == "a pixel\n[image image/png, 70 bytes]"
        # Through the registry, as the turn runs it: the result text the model reads.
        outcome = await ToolRegistry(opened.tools).execute("srv.add", {"a": 1, "b": 2}, CTX)
        assert (outcome.content, outcome.is_error) == ('{"result": 3}', False)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace, symlinks resolved (as the server sees it)."""
    return tmp_path.resolve()


async def test_the_server_runs_in_the_workspace_in_its_own_group_with_its_env(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRLOCK_RUNNER_TOKEN", "runner-secret")
    spec = server(env={"MCP_TEST_VAR": "from-the-spec"})
    async with await open_mcp_tools([spec], workspace=ws) as opened:
        where = await by_name(opened)["srv.where"].call({}, CTX)
    assert isinstance(where, dict)  # a dict is structured content as it is (no "result" wrapper)
    result = where
    assert result["cwd"] == str(ws)
    assert result["pgid"] == result["pid"] != str(os.getpgid(0))  # a process group of its own
    assert result["MCP_TEST_VAR"] == "from-the-spec"
    assert result["AIRLOCK_RUNNER_TOKEN"] == ""  # the runner's token never reaches it


async def test_allowed_tools_filters_by_glob(tmp_path: Path) -> None:
    spec = server(allowed_tools=["echo", "a*"])
    async with await open_mcp_tools([spec], workspace=tmp_path) as opened:
        assert [t.name for t in opened.tools] == ["srv.echo", "srv.add"]


async def test_an_allowed_tools_entry_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([server(allowed_tools=["echo", "raed*"])], workspace=tmp_path)
    assert "MCP server 'srv': allowed_tools entry 'raed*' matches none of its tools: add, crash," in str(
        e.value
    )


async def test_an_error_result_is_a_tool_error_with_the_servers_text(tmp_path: Path) -> None:
    async with await open_mcp_tools([server()], workspace=tmp_path) as opened:
        with pytest.raises(ToolError) as e:
            await by_name(opened)["srv.fail"].call({"message": "the disk is full"}, CTX)
        assert e.value.kind == "execution_failed"
        assert "the disk is full" in e.value.message
        outcome = await ToolRegistry(opened.tools).execute("srv.fail", {"message": "no"}, CTX)
        assert (
            outcome.is_error and outcome.content.startswith("execution_failed: ") and "no" in outcome.content
        )


async def test_invalid_input_is_invalid_input(tmp_path: Path) -> None:
    async with await open_mcp_tools([server()], workspace=tmp_path) as opened:
        registry = ToolRegistry(opened.tools)
        outcome = await registry.execute("srv.add", {"a": "seventeen"}, CTX)
        assert outcome.is_error
        assert outcome.content == (
            "invalid_input: invalid input for tool 'srv.add': (root): 'b' is a required property; "
            "a: 'seventeen' is not of type 'integer'"
        )
        # The tool checks its input itself too (a ToolDyn may be called without a registry).
        add = by_name(opened)["srv.add"]
        with pytest.raises(ToolError) as e:
            await add.call({"a": 1, "b": "two"}, CTX)
        assert (e.value.kind, e.value.message) == (
            "invalid_input",
            "srv.add: b: 'two' is not of type 'integer'",
        )
        with pytest.raises(ToolError) as e:
            await add.call(["not", "an", "object"], CTX)
        assert e.value.kind == "invalid_input" and "must be a JSON object" in e.value.message


async def test_a_server_that_dies_mid_call_gives_a_clear_error_at_once(tmp_path: Path) -> None:
    async with await open_mcp_tools([server()], workspace=tmp_path) as opened:
        tools = by_name(opened)
        started = time.monotonic()
        with pytest.raises(ToolError) as e:
            await tools["srv.crash"].call({"code": 3}, CTX)
        assert time.monotonic() - started < 10
        assert e.value.kind == "execution_failed"
        assert (
            e.value.message == "MCP server 'srv' exited (code 3): fatal: the test server crashes on purpose"
        )
        # Every later call says the same, without waiting.
        started = time.monotonic()
        with pytest.raises(ToolError) as again:
            await tools["srv.echo"].call({"text": "anyone?"}, CTX)
        assert again.value.message == e.value.message
        assert time.monotonic() - started < 3


async def test_a_call_past_call_timeout_s_fails_in_bounded_time_and_the_server_lives_on(
    tmp_path: Path,
) -> None:
    async with await open_mcp_tools([server(call_timeout_s=1)], workspace=tmp_path) as opened:
        tools = by_name(opened)
        started = time.monotonic()
        with pytest.raises(ToolError) as e:
            await tools["srv.sleep"].call({"seconds": 60}, CTX)
        assert time.monotonic() - started < 5
        assert e.value.message == "MCP server 'srv' did not answer 'sleep' within 1s (call_timeout_s)"
        assert await tools["srv.echo"].call({"text": "still here"}, CTX) == {"result": "still here"}


async def test_a_server_that_never_answers_fails_the_start_in_bounded_time(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([server("silent", startup_timeout_s=1.5)], workspace=tmp_path)
    assert time.monotonic() - started < 10
    message = str(e.value)
    assert message.startswith("MCP server 'srv' (stdio: ")
    assert "did not start: no answer within 1.5s (startup_timeout_s)" in message


async def test_a_server_that_exits_at_start_names_its_code_and_stderr(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([server("exit-at-start", "4")], workspace=tmp_path)
    assert str(e.value).endswith(
        "did not start: the server exited (code 4): fatal: cannot open the database (on purpose)"
    )


async def test_a_missing_program_and_a_missing_workspace_are_clear(tmp_path: Path) -> None:
    missing = McpServerSpec(name="nope", transport="stdio", command=["no-such-mcp-server", "--stdio"])
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([missing], workspace=tmp_path)
    assert str(e.value) == (
        "MCP server 'nope' (stdio: no-such-mcp-server --stdio) did not start: the server exited "
        "(code 127): bash: line 1: exec: no-such-mcp-server: not found"
    )
    with pytest.raises(SpecError, match="MCP server 'nope' \\(stdio\\) needs a workspace directory"):
        await open_mcp_tools([missing], workspace=None)


async def test_every_failing_server_is_named_and_allowed_tools_leaves_a_bad_tool_out(tmp_path: Path) -> None:
    good = server()
    bad = server("exit-at-start", "2").model_copy(update={"name": "bad"})
    worse = server("bad-names").model_copy(update={"name": "worse"})
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([good, bad, worse], workspace=tmp_path)
    lines = str(e.value).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("MCP server 'bad' (stdio: ") and "exited (code 2)" in lines[0]
    assert lines[1] == (
        "MCP server 'worse': tool 'bad name!' has an invalid name (1-128 of A-Z a-z 0-9 _ - .); "
        "leave it out with allowed_tools"
    )
    # Leaving the bad tool out makes the server usable.
    fixed = worse.model_copy(update={"allowed_tools": ["echo"]})
    async with await open_mcp_tools([fixed], workspace=tmp_path) as opened:
        assert [t.name for t in opened.tools] == ["worse.echo"]


async def test_closing_stops_the_server_and_everything_it_started(tmp_path: Path) -> None:
    opened = await open_mcp_tools([server()], workspace=tmp_path)
    tools = by_name(opened)
    where = await tools["srv.where"].call({}, CTX)
    assert isinstance(where, dict)
    server_pid = int(str(where["pid"]))
    child = await tools["srv.spawn_child"].call({}, CTX)
    assert isinstance(child, dict)
    child_pid = int(str(child["result"]))
    assert process_alive(server_pid) and process_alive(child_pid)
    started = time.monotonic()
    await opened.aclose()
    assert time.monotonic() - started < 10
    assert await process_gone(server_pid) and await process_gone(child_pid)  # the setsid child too
    await opened.aclose()  # idempotent
    with pytest.raises(ToolError) as e:
        await tools["srv.echo"].call({"text": "late"}, CTX)
    assert e.value.message.startswith("MCP server 'srv' is not connected: ")


async def test_cancelling_the_start_leaves_nothing_running(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    spec = McpServerSpec(
        name="slow",
        transport="stdio",
        command=["bash", "-c", f"echo $$ > {marker}; exec sleep 300"],
        startup_timeout_s=60,
    )
    task = asyncio.create_task(open_mcp_tools([spec], workspace=tmp_path))
    deadline = time.monotonic() + 10
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    pid = int(marker.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await process_gone(pid)


async def test_no_servers_open_nothing(tmp_path: Path) -> None:
    async with await open_mcp_tools([], workspace=None) as opened:
        assert opened.tools == [] and opened.servers == []

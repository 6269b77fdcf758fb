"""Sandbox tools: workspace confinement, bash process-group kill and caps, http, calculator."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import airlock.tools as tools_pkg
from airlock.errors import SpecError, ToolError
from airlock.testing import FakeHTTPServer, FakeResponse, RecordedRequest
from airlock.tools import available_tools, build_tools, evaluate
from airlock.turn import ToolContext, ToolDyn

CTX = ToolContext(tool_use_id="t1")


def _tool(name: str, workspace: Path | None, **options: Any) -> ToolDyn:
    (tool,) = build_tools([name], {name: options} if options else {}, workspace)
    return tool


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    return root


# --- catalog ---------------------------------------------------------------------------------


def test_exports_match_all() -> None:
    public = {n for n in dir(tools_pkg) if not n.startswith("_") and n != "annotations"}
    assert set(tools_pkg.__all__) <= public
    assert {"available_tools", "build_tools"} <= set(tools_pkg.__all__)


def test_build_tools_builds_each_tool_in_order_and_skips_effect_tools(ws: Path) -> None:
    names = [*available_tools(), "write_memory", "signal"]
    built = build_tools(names, {}, ws)
    assert [t.name for t in built] == available_tools()
    for tool in built:
        assert isinstance(tool, ToolDyn)
        assert tool.input_schema["type"] == "object"
        assert tool.description


def test_build_tools_errors(ws: Path) -> None:
    with pytest.raises(SpecError, match=r"unknown tool 'nope'; valid tools: .*bash"):
        build_tools(["nope"], {}, ws)
    with pytest.raises(SpecError, match=r"invalid options for tool 'bash': tiemout_s"):
        build_tools(["bash"], {"bash": {"tiemout_s": 3}}, ws)
    with pytest.raises(SpecError, match="needs a workspace"):
        build_tools(["read_file"], {}, None)
    with pytest.raises(SpecError, match="not a directory"):
        build_tools(["read_file"], {}, ws / "hello.txt")
    assert [t.name for t in build_tools(["calculator"], {}, None)] == ["calculator"]


async def test_invalid_input_is_a_tool_error(ws: Path) -> None:
    with pytest.raises(ToolError) as e:
        await _tool("read_file", ws).call({"pth": "x"}, CTX)
    assert e.value.kind == "invalid_input"
    assert "path" in e.value.message


# --- file tools and confinement --------------------------------------------------------------


async def test_read_write_list_edit(ws: Path) -> None:
    write, read = _tool("write_file", ws), _tool("read_file", ws)
    assert await write.call({"path": "sub/dir/a.txt", "content": "one two two"}, CTX) == (
        "wrote 11 bytes to sub/dir/a.txt"
    )
    assert await read.call({"path": "sub/dir/a.txt"}, CTX) == "one two two"
    assert await read.call({"path": str(ws / "hello.txt")}, CTX) == "hello world\n"  # absolute, inside

    edit = _tool("edit_file", ws)
    with pytest.raises(ToolError, match="occurs 2 times"):
        await edit.call({"path": "sub/dir/a.txt", "old_string": "two", "new_string": "2"}, CTX)
    with pytest.raises(ToolError, match="not found"):
        await edit.call({"path": "sub/dir/a.txt", "old_string": "three", "new_string": "3"}, CTX)
    assert (ws / "sub/dir/a.txt").read_text() == "one two two"  # failed edits change nothing
    await edit.call({"path": "sub/dir/a.txt", "old_string": "one", "new_string": "1"}, CTX)
    await edit.call(
        {"path": "sub/dir/a.txt", "old_string": "two", "new_string": "2", "replace_all": True}, CTX
    )
    assert (ws / "sub/dir/a.txt").read_text() == "1 2 2"

    (ws / "link").symlink_to(ws / "sub")
    listing = await _tool("list_files", ws).call({"recursive": True}, CTX)
    assert isinstance(listing, dict)
    assert [(e["path"], e["type"]) for e in listing["entries"]] == [  # type: ignore[index,union-attr]
        ("hello.txt", "file"),
        ("link", "symlink"),
        ("sub", "dir"),
        ("sub/dir", "dir"),
        ("sub/dir/a.txt", "file"),
    ]
    assert listing["truncated"] is False


@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_files"])
@pytest.mark.parametrize("make_path", ["dotdot", "absolute", "symlink_file", "symlink_dir", "dotdot_inner"])
async def test_paths_outside_the_workspace_are_refused(
    tmp_path: Path, ws: Path, tool: str, make_path: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("top secret")
    (ws / "esc_file").symlink_to(secret)
    (ws / "esc_dir").symlink_to(outside)
    (ws / "inner").mkdir()
    path = {
        "dotdot": "../outside/secret.txt",
        "absolute": str(secret),
        "symlink_file": "esc_file",
        "symlink_dir": "esc_dir/secret.txt",
        "dotdot_inner": "inner/../../outside/secret.txt",
    }[make_path]
    if tool == "list_files" and make_path in ("symlink_file", "symlink_dir"):
        path = "esc_dir"
    args: dict[str, Any] = {"path": path}
    if tool == "write_file":
        args["content"] = "pwned"
    if tool == "edit_file":
        args |= {"old_string": "top", "new_string": "pwned"}
    with pytest.raises(ToolError) as e:
        await _tool(tool, ws).call(args, CTX)
    assert e.value.kind == "permission_denied", e.value.message
    assert secret.read_text() == "top secret"


async def test_etc_passwd_is_refused(ws: Path) -> None:
    with pytest.raises(ToolError) as e:
        await _tool("read_file", ws).call({"path": "/etc/passwd"}, CTX)
    assert e.value.kind == "permission_denied"


async def test_file_size_caps(ws: Path) -> None:
    (ws / "big.txt").write_bytes(b"x" * 100)
    text = await _tool("read_file", ws, max_bytes=10).call({"path": "big.txt"}, CTX)
    assert text == "x" * 10 + "\n[truncated 90 bytes]"
    with pytest.raises(ToolError, match="at most 10"):
        await _tool("write_file", ws, max_bytes=10).call({"path": "w.txt", "content": "y" * 11}, CTX)
    assert not (ws / "w.txt").exists()
    with pytest.raises(ToolError, match="edits at most 10"):
        await _tool("edit_file", ws, max_bytes=10).call(
            {"path": "big.txt", "old_string": "x", "new_string": "y", "replace_all": True}, CTX
        )
    listing = await _tool("list_files", ws, max_entries=1).call({}, CTX)
    assert isinstance(listing, dict) and listing["truncated"] is True and len(listing["entries"]) == 1  # type: ignore[arg-type]


# --- bash ------------------------------------------------------------------------------------


async def test_bash_runs_in_the_workspace_and_reports_exit_code(ws: Path) -> None:
    bash = _tool("bash", ws)
    result = await bash.call({"command": "pwd; cat hello.txt; echo oops >&2; exit 3"}, CTX)
    assert result == {"exit_code": 3, "stdout": f"{ws}\nhello world\n", "stderr": "oops\n"}
    killed = await bash.call({"command": "kill -9 $$"}, CTX)
    assert isinstance(killed, dict) and killed["exit_code"] == -9 and killed["signal"] == "SIGKILL"


async def test_bash_does_not_leak_the_runner_token(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_RUNNER_TOKEN", "s3cret-token-value")
    result = await _tool("bash", ws).call({"command": "echo ${AIRLOCK_RUNNER_TOKEN:-unset}"}, CTX)
    assert isinstance(result, dict) and result["stdout"] == "unset\n"


async def test_bash_timeout_kills_the_whole_process_group(ws: Path) -> None:
    marker = ws / "late.txt"
    # A child in the background (and a grandchild) would write the marker after 1.5 s.
    command = "(sleep 1.5; echo late > late.txt) & bash -c 'sleep 1.5; echo late > late2.txt' & sleep 30"
    started = time.monotonic()
    with pytest.raises(ToolError) as e:
        await _tool("bash", ws).call({"command": command, "timeout_s": 0.5}, CTX)
    assert e.value.kind == "execution_failed"
    assert "timed out after 0.5s" in e.value.message
    assert time.monotonic() - started < 5
    await asyncio.sleep(2.5)
    assert not marker.exists() and not (ws / "late2.txt").exists()


async def test_bash_cancellation_kills_the_group(ws: Path) -> None:
    task = asyncio.create_task(
        _tool("bash", ws).call({"command": "(sleep 1; touch late.txt) & sleep 30"}, CTX)
    )
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(1.5)
    assert not (ws / "late.txt").exists()


async def test_bash_background_processes_do_not_outlive_the_command(ws: Path) -> None:
    result = await _tool("bash", ws).call({"command": "(sleep 1; touch late.txt) & echo started"}, CTX)
    assert isinstance(result, dict) and result["stdout"] == "started\n" and result["exit_code"] == 0
    await asyncio.sleep(1.5)
    assert not (ws / "late.txt").exists()


async def test_bash_output_is_capped_and_marked(ws: Path) -> None:
    result = await _tool("bash", ws, max_output_bytes=100).call(
        {"command": "head -c 100000 /dev/zero | tr '\\0' a; head -c 50 /dev/zero | tr '\\0' b >&2"}, CTX
    )
    assert isinstance(result, dict)
    assert result["stdout"] == "a" * 100 + "\n[truncated 99900 bytes]"
    assert result["stderr"] == "b" * 50
    assert result["exit_code"] == 0


async def test_bash_timeout_is_capped_by_options(ws: Path) -> None:
    with pytest.raises(ToolError, match=r"timed out after 0.3s"):
        await _tool("bash", ws, timeout_s=0.3).call({"command": "sleep 5", "timeout_s": 100}, CTX)


# --- http_request ----------------------------------------------------------------------------


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """A FakeHTTPServer on 127.0.0.1 answering 201: the request echoed as JSON, or a large body at /big."""

    def echo(request: RecordedRequest) -> FakeResponse:
        if request.path == "/big":
            return FakeResponse(201, b"z" * 100_000)
        return FakeResponse(
            201,
            {
                "method": request.method,
                "path": request.path,
                "x-test": request.headers.get("x-test"),
                "body": request.body.decode(),
            },
        )

    async with FakeHTTPServer(echo) as server:
        yield server.origin


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


async def test_http_request_round_trip(http_server: str) -> None:
    tool = _tool("http_request", None)
    result = await tool.call(
        {"method": "POST", "url": f"{http_server}/echo", "headers": {"X-Test": "1"}, "body": "hé"}, CTX
    )
    assert isinstance(result, dict)
    assert result["status"] == 201 and result["truncated"] is False
    assert json.loads(str(result["body"])) == {"method": "POST", "path": "/echo", "x-test": "1", "body": "hé"}


async def test_http_request_body_is_capped(http_server: str) -> None:
    result = await _tool("http_request", None, max_response_bytes=1000).call(
        {"url": f"{http_server}/big"}, CTX
    )
    assert isinstance(result, dict) and result["truncated"] is True
    assert str(result["body"]).startswith("z" * 1000 + "\n[truncated")


async def test_http_request_errors() -> None:
    tool = _tool("http_request", None, timeout_s=2)
    with pytest.raises(ToolError) as e:
        await tool.call({"url": "file:///etc/passwd"}, CTX)
    assert e.value.kind == "invalid_input"
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ToolError) as e:
        await tool.call({"url": f"http://127.0.0.1:{port}/"}, CTX)
    assert e.value.kind == "execution_failed" and "ConnectError" in e.value.message


async def test_http_request_honours_the_proxy_env(http_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With HTTP_PROXY set, the request goes to the proxy (here: the echo server itself)."""
    monkeypatch.setenv("HTTP_PROXY", http_server)
    monkeypatch.setenv("NO_PROXY", "")
    result = await _tool("http_request", None).call({"url": "http://example.invalid/via-proxy"}, CTX)
    assert isinstance(result, dict)
    assert json.loads(str(result["body"]))["path"] == "http://example.invalid/via-proxy"


# --- calculator ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2+2", 4), ("2 * (3 + 4) ** 2", 98), ("7 // 2", 3), ("-7 % 3", 2), ("1/4", 0.25), ("sqrt(16)", 4.0)],
)
def test_calculator_values(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "kind"),
    [
        ("__import__('os').system('id')", "invalid_input"),
        ("().__class__", "invalid_input"),
        ("open('x')", "invalid_input"),
        ("2 +", "invalid_input"),
        ("1/0", "execution_failed"),
        ("9**9**9", "execution_failed"),
        ("10.0**400", "execution_failed"),
        ("sqrt(-1)", "execution_failed"),
        ("'a' * 3", "invalid_input"),
    ],
)
def test_calculator_refuses(expression: str, kind: str) -> None:
    with pytest.raises(ToolError) as e:
        evaluate(expression)
    assert e.value.kind == kind


async def test_calculator_tool_returns_text() -> None:
    assert await _tool("calculator", None).call({"expression": "6*7"}, CTX) == "42"


# --- hostile arguments (regressions found by tests/adversarial/test_fuzz_tools.py) ------------


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {"path": "\ud800"}),
        ("write_file", {"path": "x.txt", "content": "\ud800"}),
        ("edit_file", {"path": "hello.txt", "old_string": "hello", "new_string": "\udcff"}),
        ("bash", {"command": "echo a\x00b"}),
        ("http_request", {"url": "http://127.0.0.1:1/", "body": "\ud800"}),
        ("http_request", {"url": "http://127.0.0.1:1/", "headers": {"x": "€"}}),
        ("http_request", {"url": "http://127.0.0.1:99999/"}),
        ("read_file", {"path": "a/" * 3000}),
    ],
)
async def test_unusable_text_is_invalid_input(ws: Path, name: str, args: dict[str, Any]) -> None:
    with pytest.raises(ToolError) as e:
        await _tool(name, ws).call(args, CTX)
    assert e.value.kind == "invalid_input", e.value.message
    assert (ws / "hello.txt").read_text() == "hello world\n"


async def test_echoed_huge_arguments_are_cut(ws: Path) -> None:
    for name, args in [
        ("read_file", {"path": "x" * 4000}),
        ("read_file", {"path": "../" * 1300}),
        ("read_file", {"x" * 100_000: 1, "path": "hello.txt"}),
        ("http_request", {"url": "gopher://" + "x" * 100_000}),
        ("http_request", {"url": "http://127.0.0.1:1/" + "x" * 100_000}),
    ]:
        with pytest.raises(ToolError) as e:
            await _tool(name, ws).call(args, CTX)
        assert len(e.value.message) < 3000, (name, e.value.message[:100])


@pytest.mark.parametrize("name", ["read_file", "write_file", "edit_file"])
async def test_a_fifo_is_refused_not_opened(ws: Path, name: str) -> None:
    """Opening a FIFO without a peer blocks forever: it is refused from its type."""
    os.mkfifo(ws / "fifo")
    args: dict[str, Any] = {"path": "fifo", "content": "x", "old_string": "x", "new_string": "y"}
    args = {k: v for k, v in args.items() if k in _tool(name, ws).input_schema["properties"]}
    with pytest.raises(ToolError, match="not a regular file"):
        await asyncio.wait_for(_tool(name, ws).call(args, CTX), 5)


async def test_edit_file_refuses_growth_before_building_it(ws: Path) -> None:
    (ws / "a.txt").write_text("a" * 100_000)
    edit = {"path": "a.txt", "old_string": "a", "new_string": "b" * 1_000_000, "replace_all": True}
    with pytest.raises(ToolError, match=r"would be 100000000000 bytes \(limit 1048576\)"):
        await _tool("edit_file", ws).call(edit, CTX)
    assert (ws / "a.txt").read_text() == "a" * 100_000


async def test_list_files_shows_a_non_utf8_name_readably(ws: Path) -> None:
    (ws / os.fsdecode(b"bad-\xff.txt")).write_text("x")
    listing = await _tool("list_files", ws).call({}, CTX)
    assert isinstance(listing, dict)
    assert [e["path"] for e in listing["entries"]] == ["bad-\ufffd.txt", "hello.txt"]  # type: ignore[index,union-attr]


@pytest.mark.parametrize(
    ("expression", "outcome"),
    [
        ("round(5, -10**9)", 0),
        ("round(1.5, 10**9)", 1.5),
        ("round(2**4000, -1300)", 0),
        ("-" * 999 + "1", "invalid_input"),
        ("not " * 240 + "1", "invalid_input"),
        ("1" + "+1" * 499, 500),
    ],
)
def test_calculator_bounds_round_and_nesting(expression: str, outcome: float | str) -> None:
    if isinstance(outcome, str):
        with pytest.raises(ToolError) as e:
            evaluate(expression)
        assert e.value.kind == outcome
    else:
        assert evaluate(expression) == outcome

"""MCP tools from a real streamable-HTTP server this test starts on 127.0.0.1: directly, and
through airlock's egress proxy named by HTTP_PROXY (allowed, and denied with its event)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airlock.errors import SpecError, ToolError
from airlock.policy.plan import compile_plan
from airlock.proxy import EgressEvent, EgressProxy, MemorySink
from airlock.spec import McpServerSpec
from airlock.tools import open_mcp_tools
from airlock.turn import ToolContext, ToolRegistry
from layer0 import EnvironmentSpec
from tests.support.mcp_servers import serving_http

CTX = ToolContext(tool_use_id="t1")


@pytest.fixture
def http_server() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    with serving_http() as served:
        yield served


def remote(port: int, path: str = "/mcp", **fields: object) -> McpServerSpec:
    return McpServerSpec.model_validate(
        {"name": "remote", "transport": "http", "url": f"http://127.0.0.1:{port}{path}", **fields}
    )


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


async def test_lists_and_calls_over_streamable_http(http_server: tuple[object, int], no_proxy: None) -> None:
    _, port = http_server
    async with await open_mcp_tools([remote(port)], workspace=None) as opened:
        tools = {t.name: t for t in opened.tools}
        assert "remote.add" in tools and "remote.echo" in tools
        # Every tool of an http server reaches outside the sandbox.
        registry = ToolRegistry(opened.tools)
        assert registry.risks("remote.echo") == ("external",)
        assert registry.risks("remote.add") == ("destructive", "external")
        assert await tools["remote.add"].call({"a": 2, "b": 40}, CTX) == {"result": 42}
        with pytest.raises(ToolError) as e:
            await tools["remote.fail"].call({"message": "quota exceeded"}, CTX)
        assert e.value.kind == "execution_failed" and "quota exceeded" in e.value.message


async def test_a_server_that_goes_away_mid_session_is_a_clear_error(
    http_server: tuple[subprocess.Popen[bytes], int], no_proxy: None
) -> None:
    proc, port = http_server
    async with await open_mcp_tools([remote(port, call_timeout_s=5)], workspace=None) as opened:
        echo = next(t for t in opened.tools if t.name == "remote.echo")
        proc.kill()
        proc.wait(10)
        started = time.monotonic()
        with pytest.raises(ToolError) as e:
            await echo.call({"text": "hello?"}, CTX)
        assert time.monotonic() - started < 10
        assert e.value.kind == "execution_failed" and e.value.message.startswith("MCP server 'remote'")


async def test_nothing_listening_and_a_wrong_path_fail_the_start_clearly(
    http_server: tuple[object, int], no_proxy: None
) -> None:
    _, port = http_server
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([remote(port, "/not-mcp")], workspace=None)
    assert str(e.value) == (
        f"MCP server 'remote' (http: http://127.0.0.1:{port}/not-mcp) did not start: the server "
        "answered HTTP 404 Not Found: Not Found (MCP error -32601: Not Found)"
    )
    closed = remote(1)  # port 1: nothing listens there
    started = time.monotonic()
    with pytest.raises(SpecError) as e:
        await open_mcp_tools([closed], workspace=None)
    assert time.monotonic() - started < 10
    assert str(e.value).startswith(
        "MCP server 'remote' (http: http://127.0.0.1:1/mcp) did not start: ConnectError"
    )


def egress_plan(*allowed: tuple[str, int]) -> object:
    spec = EnvironmentSpec.model_validate(
        {
            "network": {
                "default": "deny",
                "rules": [{"destination": d, "port": p, "action": "allow"} for d, p in allowed],
            }
        }
    )
    return compile_plan(spec).egress


async def test_through_the_egress_proxy_allowed_then_denied_with_its_event(
    http_server: tuple[object, int], no_proxy: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, port = http_server
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")
    sink = MemorySink()
    # Loopback is granted only by an explicit CIDR rule inside it.
    async with EgressProxy(egress_plan(("127.0.0.1/32", port)), sink) as proxy:  # type: ignore[arg-type]
        host, proxy_port = proxy.address
        monkeypatch.setenv("HTTP_PROXY", f"http://{host}:{proxy_port}")
        async with await open_mcp_tools([remote(port)], workspace=None) as opened:
            add = next(t for t in opened.tools if t.name == "remote.add")
            assert await add.call({"a": 1, "b": 1}, CTX) == {"result": 2}
    allowed = [e for e in sink.events if isinstance(e, EgressEvent) and e.phase == "decision"]
    assert allowed and all(e.allowed and (e.host, e.port) == ("127.0.0.1", port) for e in allowed)

    sink = MemorySink()
    async with EgressProxy(egress_plan(("127.0.0.1/32", port + 1)), sink) as proxy:  # type: ignore[arg-type]
        host, proxy_port = proxy.address
        monkeypatch.setenv("HTTP_PROXY", f"http://{host}:{proxy_port}")
        with pytest.raises(SpecError) as e:
            await open_mcp_tools([remote(port)], workspace=None)
    message = str(e.value)
    assert message.startswith(f"MCP server 'remote' (http: http://127.0.0.1:{port}/mcp) did not start: ")
    assert "did not start: the server answered HTTP 403 Forbidden: airlock egress denied: " in message
    denied = [e for e in sink.events if isinstance(e, EgressEvent) and e.phase == "decision"]
    assert denied and all(not e.allowed and (e.host, e.port) == ("127.0.0.1", port) for e in denied)
    assert denied[0].rule == "deny special 127.0.0.0/8"  # loopback, and no CIDR rule for this port
    assert denied[0].reason in message

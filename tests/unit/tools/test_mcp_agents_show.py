"""``airlock agents show AGENT`` lists the agent's MCP servers (and whether its egress policy
reaches each http one); probing starts a real stdio server and a real HTTP server this test
started on 127.0.0.1, and lists their tools by their namespaced names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from airlock.cli import app
from airlock.cli._agents import agents_show
from airlock.config import load_config
from tests.support.mcp_servers import serving_http, stdio_command


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def http_port() -> Iterator[int]:
    with serving_http() as (_, port):
        yield port


def write_config(tmp_path: Path, servers: list[dict[str, Any]], allow: list[dict[str, Any]]) -> Path:
    agent = {
        "provider": {
            "kind": "scripted",
            "script": [{"response": {"content": [], "stop_reason": "end_turn"}}],
        },
        "tools": ["calculator"],
        "mcp_servers": servers,
        "network": {"allow": allow},
    }
    path = tmp_path / "airlock.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "agents": {"tooly": agent}}), encoding="utf-8")
    return path


def test_show_lists_the_mcp_servers_and_their_egress(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        [
            {"name": "files", "transport": "stdio", "command": ["files-mcp", "--root", "."]},
            {
                "name": "tickets",
                "transport": "http",
                "url": "https://tickets.example.com/mcp",
                "allowed_tools": ["get_*", "search"],
            },
            {"name": "wiki", "transport": "http", "url": "http://wiki.example.org:8080/mcp"},
        ],
        [{"destination": "tickets.example.com", "port": 443}],
    )
    result = CliRunner().invoke(app, ["agents", "show", "tooly", "-c", str(config)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "MCP servers (their tools are offered as <server>.<tool>)" in out
    assert "files-mcp --root ." in out and "https://tickets.example.com/mcp" in out
    assert "get_*, search" in out
    assert "allowed by name (tickets.example.com:443), if it resolves to public addresses" in out
    assert "wiki.example.org:8080 denied: no name rule allows it" in " ".join(out.split())

    result = CliRunner().invoke(app, ["agents", "show", "tooly", "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["mcp_servers"] == ["files", "tickets", "wiki"]
    rows = shown["mcp"]
    assert rows[0] == {
        "server": "files",
        "transport": "stdio",
        "command or url": "files-mcp --root .",
        "allowed tools": "all",
        "egress": "-",
    }
    assert rows[1]["allowed tools"] == "get_*, search"
    assert rows[2]["egress"].startswith("wiki.example.org:8080 denied: ")


def test_probe_lists_each_servers_tools_by_namespaced_name(
    tmp_path: Path, http_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        [
            {
                "name": "local",
                "transport": "stdio",
                "command": stdio_command(),
                "allowed_tools": ["echo", "add"],
            },
            {"name": "remote", "transport": "http", "url": f"http://127.0.0.1:{http_port}/mcp"},
        ],
        [{"destination": "127.0.0.1/32", "port": http_port}],
    )
    agent = load_config(config).agent("tooly")
    agents_show(agent, as_json=True, probe=True)
    probe = json.loads(capsys.readouterr().out)["mcp_probe"]
    assert probe["local"] == {
        "tools": [
            {"name": "local.echo", "description": "Return the text."},
            {"name": "local.add", "description": "Add two integers."},
        ],
        "error": None,
    }
    assert probe["remote"]["error"] is None
    assert "remote.spawn_child" in [t["name"] for t in probe["remote"]["tools"]]

    agents_show(agent, as_json=False, probe=True)
    out = capsys.readouterr().out
    assert "probed from this machine, not from the sandbox" in out
    assert "local: 2 tool(s)" in out and "local.echo" in out and "remote.add" in out


def test_probe_names_an_unusable_server_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        [{"name": "broken", "transport": "stdio", "command": stdio_command("exit-at-start", "5")}],
        [],
    )
    agent = load_config(config).agent("tooly")
    with pytest.raises(typer.Exit) as e:
        agents_show(agent, as_json=False, probe=True)
    assert e.value.exit_code == 1
    out = capsys.readouterr().out
    assert "broken: unusable" in out
    assert "exited (code 5): fatal: cannot open the database (on purpose)" in " ".join(out.split())


def test_probe_does_not_hand_the_hosts_secrets_to_a_stdio_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_TEST_VAR", "a host secret")
    config = write_config(
        tmp_path,
        [
            {
                "name": "envcheck",
                "transport": "stdio",
                "command": [
                    "bash",
                    "-c",
                    'test -z "$MCP_TEST_VAR" || { echo "leaked" >&2; exit 9; }; exit 7',
                ],
            }
        ],
        [],
    )
    agent = load_config(config).agent("tooly")
    with pytest.raises(typer.Exit):
        agents_show(agent, as_json=True, probe=True)
    error = json.loads(capsys.readouterr().out)["mcp_probe"]["envcheck"]["error"]
    assert "exited (code 7) (no stderr)" in error  # 9 (and "leaked" on stderr) had the variable come through


def test_the_probe_flag_of_agents_show(tmp_path: Path, http_port: int) -> None:
    config = write_config(
        tmp_path,
        [
            {"name": "remote", "transport": "http", "url": f"http://127.0.0.1:{http_port}/mcp"},
            {"name": "broken", "transport": "stdio", "command": stdio_command("exit-at-start", "6")},
        ],
        [{"destination": "127.0.0.1/32", "port": http_port}],
    )
    result = CliRunner().invoke(app, ["agents", "show", "tooly", "-c", str(config), "--probe", "--json"])
    assert result.exit_code == 1, result.output  # a server is unusable
    probe = json.loads(result.stdout)["mcp_probe"]
    assert "remote.echo" in [t["name"] for t in probe["remote"]["tools"]] and probe["remote"]["error"] is None
    assert "exited (code 6)" in probe["broken"]["error"]

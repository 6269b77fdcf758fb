"""``python -m airlock.proxy`` as a real process on loopback; its output is captured and grepped."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from airlock.policy.plan import EgressPlan, EgressRule
from airlock.proxy import PROXY_EVENT, CredentialProxyEvent, EgressEvent

from .proxy_servers import RecordingServer

SECRET = "sk-ant-api03-CLI-SECRET-9876543210"


async def start(*args: str, env: dict[str, str] | None = None) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    line = (await asyncio.wait_for(proc.stderr.readline(), 20)).decode()
    assert "listening on" in line, line
    return proc, line.rsplit(" ", 1)[1].strip()


async def stop(proc: asyncio.subprocess.Process) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err
    return out.decode(), err.decode()


async def test_egress_cli_enforces_plan_and_writes_events(
    tmp_path: Path, http_server: RecordingServer, other_server: RecordingServer
) -> None:
    plan = EgressPlan(rules=(EgressRule(destination="127.0.0.1/32", kind="cidr", port=http_server.port,
                                        action="allow", source="test"),))  # fmt: skip
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    events = tmp_path / "events.jsonl"
    proc, addr = await start("egress", "--listen", "127.0.0.1:0", "--plan-file", str(tmp_path / "plan.json"),
                             "--events", f"file:{events}", "--events", "stdout")  # fmt: skip
    try:
        async with httpx.AsyncClient(proxy=f"http://{addr}", trust_env=False, timeout=10) as c:
            ok = await c.get(f"http://127.0.0.1:{http_server.port}/cli")
            denied = await c.get(f"http://127.0.0.1:{other_server.port}/")
            unnamed = await c.get(f"http://not-allowed.invalid:{other_server.port}/")  # never resolved
    finally:
        out, _ = await stop(proc)
    assert ok.status_code == 200 and ok.json()["path"] == "/cli"
    assert denied.status_code == 403 and unnamed.status_code == 403
    assert other_server.connections == 0
    parsed = [PROXY_EVENT.validate_json(line) for line in events.read_text().splitlines()]
    assert all(isinstance(e, EgressEvent) for e in parsed)
    summary = [(e.phase, e.allowed, e.port) for e in parsed if isinstance(e, EgressEvent)]
    assert summary == [
        ("decision", True, http_server.port),
        ("closed", True, http_server.port),
        ("decision", False, other_server.port),
        ("decision", False, other_server.port),
    ]
    assert parsed[-1].reason.endswith("(default deny; not resolved)")
    assert out.splitlines() == events.read_text().splitlines()  # the same lines on stdout


async def test_credentials_cli_reads_secret_from_file_and_never_prints_it(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    events = tmp_path / "events.jsonl"
    proc, addr = await start(
        "credentials", "--listen", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{http_server.port}",
        "--header", "x-api-key", "--credential", "anthropic-api-key", "--secret-file", str(secret_file),
        "--events", f"file:{events}", "--events", "stdout",
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
            r = await c.post(f"http://{addr}/v1/echo/{SECRET}", content=b"{}", headers={"x-api-key": "guess"})
        host, port = addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET /v1/{SECRET}?k={SECRET} HTTP/1.1\r\nContent-Length: x\r\n\r\n".encode())
        bad = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        out, err = await stop(proc)
    assert r.status_code == 200
    assert http_server.requests[0].headers["x-api-key"] == [SECRET]
    assert bad.startswith(b"HTTP/1.1 400") and SECRET.encode() not in bad
    cmdline = " ".join(map(str, [sys.executable, "-m", "airlock.proxy", "credentials"]))
    for text in (out, err, events.read_text(), cmdline):
        assert SECRET not in text
    lines = [PROXY_EVENT.validate_json(x) for x in events.read_text().splitlines()]
    assert lines and all(isinstance(e, CredentialProxyEvent) for e in lines)
    assert [(e.status, e.path) for e in lines if isinstance(e, CredentialProxyEvent)] == [
        (200, "/v1/echo/[REDACTED]"),  # even a path carrying the secret is redacted
        (400, "/v1/[REDACTED]"),
    ]


async def test_credentials_cli_secret_from_env_and_missing_secret(tmp_path: Path) -> None:
    env = {**os.environ, "MY_SECRET": SECRET}
    proc, _ = await start("credentials", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9",
                          "--header", "x-api-key", "--secret-env", "MY_SECRET", env=env)  # fmt: skip
    out, err = await stop(proc)
    assert SECRET not in out + err
    missing = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", "credentials", "--listen", "127.0.0.1:0",
        "--upstream", "http://127.0.0.1:9", "--header", "x-api-key", "--secret-file", str(tmp_path / "none"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, merr = await asyncio.wait_for(missing.communicate(), 20)
    assert missing.returncode == 1 and b"cannot read the secret file" in merr


async def test_egress_cli_rejects_invalid_plan(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(
        '{"default": "allow", "rules": [{"destination": "x", "kind": "cidr"}]}'
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", "egress", "--listen", "127.0.0.1:0",
        "--plan-file", str(tmp_path / "plan.json"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 1 and b"invalid plan file" in err

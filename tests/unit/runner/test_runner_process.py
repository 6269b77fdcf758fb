"""``python -m airlock.runner`` as a real subprocess: start-up, token handling, JSON logs, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from airlock.runner import RemoteTurn
from airlock.runner.__main__ import TOKEN_ENV, StartupError, read_token
from airlock.turn import ToolFinished, ToolStarted, TurnEvent
from layer0 import ExitReason, TurnError, TurnInput

from .runner_helpers import scripted_spec, text_step, tool_step


class Runner:
    """A runner subprocess and its parsed JSON log lines."""

    def __init__(self, proc: asyncio.subprocess.Process, address: str) -> None:
        self.proc = proc
        self.address = address
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._reader = asyncio.create_task(self._read())
        self.serving = asyncio.Event()

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            text = line.decode()
            self.raw.append(text)
            entry = json.loads(text)  # every stdout line is one JSON object
            self.lines.append(entry)
            if entry.get("msg") == "serving":
                self.serving.set()

    async def finish(self, timeout: float) -> int:  # noqa: ASYNC109
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.wait_for(self._reader, 5)
        return code


async def _spawn(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Runner:
    sock = tmp_path / "runner.sock"
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "airlock.runner",
        "--listen",
        f"unix:{sock}",
        "--workspace",
        str(workspace),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=base | (env or {}),
    )
    return Runner(proc, f"unix:{sock}")


@pytest.fixture
async def runner_with_file(tmp_path: Path) -> AsyncIterator[tuple[Runner, str, Path]]:
    token = secrets.token_urlsafe(32)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    runner = await _spawn(
        tmp_path, "--token-file", str(token_file), "--token-file-delete", "--grace-seconds", "2"
    )
    try:
        await asyncio.wait_for(runner.serving.wait(), 20)
        yield runner, token, token_file
    finally:
        if runner.proc.returncode is None:
            runner.proc.kill()
            await runner.proc.wait()


async def test_sigterm_mid_turn_ends_it_within_grace_and_exits_0(
    runner_with_file: tuple[Runner, str, Path],
) -> None:
    runner, token, token_file = runner_with_file
    assert not token_file.exists()  # --token-file-delete
    serving = next(line for line in runner.lines if line["msg"] == "serving")
    assert serving["startup_ms"] > 0 and serving["level"] == "info"

    spec = scripted_spec([tool_step("bash", {"command": "sleep 60"}), text_step("never")], ["bash"])
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(runner.address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("sleep"), events=sink))
        async with asyncio.timeout(10):
            while not any(isinstance(e, ToolStarted) for e in events):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        sent = time.monotonic()
        runner.proc.send_signal(signal.SIGTERM)
        with pytest.raises(TurnError) as e:
            await asyncio.wait_for(task, 10)
        code = await runner.finish(10)
        elapsed = time.monotonic() - sent
    assert e.value.kind == "retryable" and "stopped (SIGTERM)" in str(e.value)
    assert code == 0
    assert elapsed < 2 + 1.5  # within the grace period (2 s) plus process exit
    messages = [line["msg"] for line in runner.lines]
    assert "shutting down" in messages and messages[-1] == "stopped"
    stderr = (await runner.proc.stderr.read()).decode() if runner.proc.stderr else ""
    assert token not in "".join(runner.raw) + stderr


async def test_sigterm_lets_a_short_turn_finish(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(32)
    runner = await _spawn(tmp_path, "--grace-seconds", "10", env={TOKEN_ENV: token})
    await asyncio.wait_for(runner.serving.wait(), 20)
    spec = scripted_spec(
        [
            tool_step("bash", {"command": "sleep 0.7; env | grep -c AIRLOCK_RUNNER_TOKEN || true"}),
            text_step("ok"),
        ],
        ["bash"],
    )
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with RemoteTurn(runner.address, token, spec) as turn:
        task = asyncio.create_task(turn.execute(TurnInput.new("go"), events=sink))
        async with asyncio.timeout(10):
            while not any(isinstance(e, ToolStarted) for e in events):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        runner.proc.send_signal(signal.SIGTERM)
        output = await asyncio.wait_for(task, 10)
    assert output.exit_reason == ExitReason.complete() and output.message.as_text() == "ok"
    assert await runner.finish(10) == 0
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert json.loads(finished.output)["stdout"] == "0\n"  # the env token never reaches tools


async def test_no_token_refuses_to_start(tmp_path: Path) -> None:
    runner = await _spawn(tmp_path)
    assert await runner.finish(20) == 2
    assert runner.lines[-1]["level"] == "error" and "no token" in runner.lines[-1]["msg"]


async def test_bad_listen_address_fails_cleanly(tmp_path: Path) -> None:
    runner = await _spawn(tmp_path, "--listen", "256.1.1.1:99999", env={TOKEN_ENV: "t" * 32})
    # the last --listen wins
    assert await runner.finish(20) == 2
    assert "cannot" in runner.lines[-1]["msg"]


def test_read_token_from_env_removes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "  a-long-enough-token-value \n")
    assert read_token(None, delete=False) == "a-long-enough-token-value"
    assert TOKEN_ENV not in os.environ


def test_read_token_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(StartupError, match="no token"):
        read_token(None, delete=False)
    with pytest.raises(StartupError, match="cannot read"):
        read_token(tmp_path / "missing", delete=False)
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(StartupError, match="too short"):
        read_token(short, delete=False)
    assert short.exists()

"""``airlock run --step`` and the commands typed while a job runs, through a real command, a
real runner process and piped stdin."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from airlock.testing import text_step, tool_step

pytestmark = pytest.mark.timeout(120)


def config(tmp_path: Path, **agent: object) -> Path:
    steps = [
        tool_step("bash", {"command": "echo one"}, id="a1"),
        tool_step("bash", {"command": "echo two"}, id="a2"),
        text_step("counted to two"),
    ]
    body = {
        "provider": {"kind": "scripted", "script": steps},
        "tools": ["bash"],
        "backend": "process",
        **agent,
    }
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": {"counter": body}}))
    return path


class Session:
    """``airlock run`` with stdin and stdout pipes; lines are read on a thread."""

    def __init__(self, tmp_path: Path, cfg: Path, *flags: str) -> None:
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "AIRLOCK_DATA_DIR": str(tmp_path / "data")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "airlock", "run", "counter", "go", "--config", str(cfg), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def expect(self, text: str, within: float = 60) -> str:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed; got:\n{''.join(self.seen)}")

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code


def test_step_pauses_before_the_first_call_and_runs_one_step_per_command(tmp_path: Path) -> None:
    run = Session(tmp_path, config(tmp_path), "--step")
    try:
        run.expect("paused")
        assert not any("model call 1" in line for line in run.seen), "nothing ran before the first step"
        run.type("s")
        assert "ran bash" in run.expect("step ran")
        run.type("i")
        assert "1 model call(s)" in run.expect("inspect")
        run.type("r")
        run.expect("counted to two")
        assert run.finish() == 0
    finally:
        run.proc.kill()


def test_an_approval_is_asked_at_the_terminal(tmp_path: Path) -> None:
    gated = config(tmp_path, approval={"tools": ["bash"], "approvers": ["tester"]})
    run = Session(tmp_path, gated, "--approve-as", "tester")
    try:
        line = run.expect("approval needed")
        assert '"echo one"' in line
        run.type("y fine")
        assert "approved as tester" in run.expect("approved")
        run.expect("approval needed")  # the second call
        run.type("n not this one")
        run.expect("counted to two")
        assert run.finish() == 0
    finally:
        run.proc.kill()


def test_a_step_typed_before_the_turn_is_ready_waits_for_it(tmp_path: Path) -> None:
    run = Session(tmp_path, config(tmp_path), "--step")
    try:
        run.type("s")  # at once: the sandbox is not up yet
        assert "ran bash" in run.expect("step ran")
        assert not any("has no turn running" in line or "[s]" in line for line in run.seen), run.seen
        run.type("r")
        run.expect("counted to two")
        assert run.finish() == 0
    finally:
        run.proc.kill()


def test_stdin_ending_while_paused_lets_the_turn_run_on(tmp_path: Path) -> None:
    run = Session(tmp_path, config(tmp_path), "--step")
    try:
        run.expect("paused")
        assert run.finish() == 0  # before: it waited for a step that nobody could type
        assert any("it runs on" in line for line in run.seen), run.seen
        assert any("counted to two" in line for line in run.seen), run.seen
    finally:
        run.proc.kill()

"""``airlock serve`` as a real process on real Docker sandboxes, driven by the client verbs
(``airlock submit``, ``airlock jobs …``) as real processes too.

Each controller's sandboxes are labelled with its own pid as owner; after every stop no
container or network of that owner may remain, and the control directories are gone.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from airlock.cli._common import EXIT_CANCELLED, EXIT_USAGE
from airlock.sandbox.docker._labels import LABEL_OWNER
from airlock.testing import calculator_script, script_yaml, text_step, tool_step

pytestmark = pytest.mark.docker

QUESTION = "What is 17 * 23?"
AIRLOCK = [sys.executable, "-m", "airlock"]

#: examples/scripts/calculator.yaml's conversation, with usage and costs.
CALC_SCRIPT = script_yaml(calculator_script())
SLOW_SCRIPT = script_yaml([tool_step("bash", {"command": "sleep 60"}), text_step("slept")])

CONFIG = """\
version: 1
agents:
  # examples/airlock.yaml's demo-scripted agent
  demo-scripted:
    provider: {kind: scripted, script: calculator.yaml}
    system: You are a helpful assistant. Use the calculator for arithmetic, then answer in one sentence.
    tools: [calculator]
    backend: docker
    resources: {cpu: "1", memory: 256Mi}
    defaults: {max_turns: 6, max_duration: 30s}
  slow:
    provider: {kind: scripted, script: slow.yaml}
    tools: [bash]
    backend: docker
    resources: {cpu: "1", memory: 256Mi}
    defaults: {max_turns: 4, max_duration: 2m}
    # never resumed: these tests follow an interrupted job (test_durable_jobs.py: a resumed one)
    durability: {max_resumes: 0}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "calculator.yaml").write_text(CALC_SCRIPT)
    (tmp_path / "slow.yaml").write_text(SLOW_SCRIPT)
    path = tmp_path / "airlock.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    return path


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def cli_env(runner_image: str, state_dir: Path, tmp_path: Path) -> dict[str, str]:
    """The processes' environment: our sandbox state dir, no ambient controller or token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env["AIRLOCK_STATE_DIR"] = str(state_dir)
    env["AIRLOCK_DATA_DIR"] = str(tmp_path / "no-default-data-dir")
    env["COLUMNS"] = "200"
    return env


def _owned_by(client: Any, pid: int) -> tuple[list[Any], list[Any]]:
    owner = f"{socket.gethostname()}:{pid}"
    # The low-level listing: containers.list() inspects each one, which fails for one being
    # removed meanwhile (a sandbox's teardown, or a turn resumed in a fresh sandbox).
    containers = client.api.containers(all=True, filters={"label": f"{LABEL_OWNER}={owner}"})
    networks = client.api.networks(filters={"label": f"{LABEL_OWNER}={owner}"})
    return list(containers), list(networks)


class Serve:
    """``airlock serve`` as a subprocess: its printed address and token, and a clean stop."""

    def __init__(self, config: Path, data_dir: Path, env: dict[str, str], docker: Any, *extra: str) -> None:
        self.docker = docker
        self.env = env
        self.stderr_path = data_dir.parent / f"serve-{time.monotonic_ns()}.err"
        self._stderr: IO[str] = self.stderr_path.open("w")
        command = [*AIRLOCK, "serve", "-c", str(config), "--address", "127.0.0.1:0"]
        self.proc = subprocess.Popen(
            [*command, "--data-dir", str(data_dir), *extra],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.lines: list[str] = []
        self.address = ""
        self.printed_token: str | None = None
        self.json: dict[str, Any] | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def started(self, timeout: float = 60) -> Serve:
        """Read stdout until the address is known (the plain ``listening on`` line or JSON)."""
        deadline = time.monotonic() + timeout
        while not self.address:
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"serve did not start: {self.lines} {self.stderr()}")
            self.lines.append(line)
            if line.startswith("{"):
                self.json = json.loads(line)
                self.address = self.json["address"]
                self.printed_token = self.json.get("token")
            elif m := re.match(r"token: (\S+)$", line):
                self.printed_token = m.group(1)
            elif m := re.match(r"listening on (\S+)(?: \(.*\))?$", line):
                self.address = m.group(1)
        return self

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text()

    def stop(self, sig: int = signal.SIGINT) -> int:
        """Signal it, wait, and check that none of its sandboxes remain."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=90)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._stderr.close()
        if sig != signal.SIGKILL:
            containers, networks = _owned_by(self.docker, self.proc.pid)
            assert containers == [] and networks == [], (containers, networks)
        return code

    def cli(
        self, *args: str, token: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """``airlock ARGS --address <ours> [--token T]`` as a process."""
        auth = ["--token", token] if token is not None else []
        return subprocess.run(
            [*AIRLOCK, *args, "--address", self.address, *auth],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )

    def cli_json(self, *args: str, token: str, code: int = 0) -> dict[str, Any]:
        proc = self.cli(*args, "--json", token=token)
        assert proc.returncode == code, proc.stdout + proc.stderr
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    def wait_for(self, job_id: str, state: str, token: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.cli_json("jobs", "show", job_id, token=token)["job"]
            if job["state"] == state or time.monotonic() > deadline:
                assert job["state"] == state, job
                return job  # type: ignore[no-any-return]
            time.sleep(0.2)


@pytest.fixture
def serve(config: Path, data_dir: Path, cli_env: dict[str, str], docker_client: Any) -> Iterator[Any]:
    """``serve(*extra)`` starts a controller on ``data_dir``; all are stopped (SIGINT) at the end."""
    started: list[Serve] = []

    def start(*extra: str) -> Serve:
        s = Serve(config, data_dir, cli_env, docker_client, *extra)
        started.append(s)
        return s.started()

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.stop()


def test_serve_submit_jobs_and_the_token_printed_once(
    serve: Any, data_dir: Path, cli_env: dict[str, str], docker_client: Any, state_dir: Path
) -> None:
    first = serve()
    token = first.printed_token
    assert token, first.lines
    token_file = data_dir / "token"
    assert token_file.read_text().strip() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert any("will not be printed again" in line for line in first.lines)
    assert any("2 agent(s): demo-scripted, slow" in line for line in first.lines)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", first.address) and not first.address.endswith(":0")

    # submit --wait --json: one document with the real answer
    data = first.cli_json("submit", "demo-scripted", QUESTION, "--wait", token=token)
    job = data["job"]
    assert job["state"] == "succeeded" and job["agent"] == "demo-scripted"
    assert job["output"]["message"] == "17 x 23 = 391."
    assert data["summary"]["tools_called"] == {"calculator": 1}
    assert data["summary"]["backend"] == "docker" and data["exit_code"] == 0

    # submit --wait with live progress, the token from the environment
    env_token = {**cli_env, "AIRLOCK_TOKEN": token}
    proc = subprocess.run(
        [*AIRLOCK, "submit", "demo-scripted", QUESTION, "--wait", "--address", first.address],
        capture_output=True,
        text=True,
        env=env_token,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo-scripted: provisioning a docker sandbox (scripted/-)" in proc.stdout
    assert "sandbox ready in" in proc.stdout
    assert "model call 1: 40 in / 12 out tokens, $0.0001" in proc.stdout
    assert "✓ calculator" in proc.stdout
    assert "17 x 23 = 391." in proc.stdout and "calculator x1" in proc.stdout
    second_id = re.search(r"submitted job (\S+)", proc.stdout).group(1)  # type: ignore[union-attr]

    # jobs ls / show / logs
    listed = first.cli_json("jobs", "ls", token=token)["jobs"]
    assert [j["id"] for j in listed] == [second_id, job["id"]]
    assert all(j["state"] == "succeeded" for j in listed)
    table = first.cli("jobs", "ls", token=token)
    assert table.returncode == 0 and job["id"] in table.stdout and "complete" in table.stdout
    shown = first.cli("jobs", "show", job["id"], token=token)
    assert shown.returncode == 0, shown.stderr
    assert "17 x 23 = 391." in shown.stdout and "calculator x1" in shown.stdout
    assert QUESTION in shown.stdout
    logs = first.cli_json("jobs", "logs", job["id"], token=token)
    assert logs == {"job": job["id"], "lines": []}

    # cancel a running job: its sandbox goes before the command returns
    slow_id = first.cli_json("submit", "slow", "sleep please", token=token)["job"]["id"]
    first.wait_for(slow_id, "running", token)
    assert len(_owned_by(docker_client, first.proc.pid)[0]) == 1
    cancelled = first.cli("jobs", "cancel", slow_id, "--reason", "test over", token=token)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelled job {slow_id} (it was running); its sandbox was removed" in cancelled.stdout
    assert _owned_by(docker_client, first.proc.pid) == ([], [])
    final = first.cli_json("jobs", "show", slow_id, token=token)["job"]
    assert final["state"] == "cancelled" and "test over" in final["error"]["message"]

    # a wrong token, and none at all
    wrong = first.cli("jobs", "ls", token="not-the-token")
    assert wrong.returncode == EXIT_USAGE
    assert "UNAUTHENTICATED" in wrong.stderr and "invalid credentials" in wrong.stderr
    missing = first.cli("jobs", "ls")
    assert missing.returncode == EXIT_USAGE and "no controller token" in missing.stderr

    assert first.stop() == 0
    assert "stopped" in first.stderr()
    assert token not in first.stderr()

    # the same data dir again: the token is kept and not printed; the jobs are still there
    second = serve()
    assert second.printed_token is None
    assert not any(token in line for line in second.lines)
    assert any("(not printed)" in line for line in second.lines)
    clients_default = {**cli_env, "AIRLOCK_DATA_DIR": str(data_dir)}  # the token file, as on the machine
    proc = subprocess.run(
        [*AIRLOCK, "jobs", "ls", "--json", "--address", second.address],
        capture_output=True,
        text=True,
        env=clients_default,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert [j["id"] for j in json.loads(proc.stdout)["jobs"]] == [slow_id, second_id, job["id"]]
    assert second.stop() == 0
    assert list(state_dir.iterdir()) == []


def test_ctrl_c_while_waiting_leaves_the_job_running_and_sigint_interrupts_it(
    serve: Any, docker_client: Any, cli_env: dict[str, str], state_dir: Path
) -> None:
    s = serve("--json", "--concurrency", "2")
    assert s.json is not None
    assert s.json["agents"] == ["demo-scripted", "slow"] and s.json["token_created"] is True
    assert s.json["settings"] == {
        "concurrency": 2,
        "max_follow_ups": 16,
        "max_depth": 4,
        "parallel_children": 4,
    }
    token = s.printed_token
    assert token
    waiting = subprocess.Popen(
        [*AIRLOCK, "submit", "slow", "sleep please", "--wait", "--address", s.address, "--token", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _owned_by(docker_client, s.proc.pid)[0]:
            time.sleep(0.2)
        time.sleep(1.0)  # the tool call is under way
        waiting.send_signal(signal.SIGINT)
        stdout, stderr = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == EXIT_CANCELLED, stdout + stderr
    job_id = re.search(r"submitted job (\S+)", stdout).group(1)  # type: ignore[union-attr]
    assert "stopped watching" in stderr and f"airlock jobs cancel {job_id}" in stderr
    assert s.cli_json("jobs", "show", job_id, token=token)["job"]["state"] == "running"
    assert len(_owned_by(docker_client, s.proc.pid)[0]) == 1  # still running

    # stopping the controller interrupts it and removes its sandbox (checked by stop())
    assert s.stop() == 0
    assert "interrupting 1 running job(s)" in s.stderr()
    again = serve()
    assert again.printed_token is None
    job = again.cli_json("jobs", "show", job_id, token=token)["job"]
    assert job["state"] == "interrupted" and job["error"]["kind"] == "interrupted"
    watched = again.cli("jobs", "watch", job_id, token=token)
    assert watched.returncode == 3, watched.stdout + watched.stderr
    assert "tool bash" in watched.stdout and "interrupted" in watched.stdout
    assert again.stop() == 0
    assert list(state_dir.iterdir()) == []


@pytest.mark.attack("faults")
def test_a_killed_controller_is_recovered_on_restart(serve: Any, docker_client: Any, state_dir: Path) -> None:
    s = serve("--concurrency", "1")
    token = s.printed_token
    assert token
    job_id = s.cli_json("submit", "slow", "sleep please", token=token)["job"]["id"]
    s.wait_for(job_id, "running", token)
    queued = [s.cli_json("submit", "demo-scripted", f"q{i}", token=token)["job"]["id"] for i in range(2)]
    assert [s.cli_json("jobs", "show", q, token=token)["job"]["state"] for q in queued] == ["queued"] * 2
    assert len(_owned_by(docker_client, s.proc.pid)[0]) == 1
    s.stop(signal.SIGKILL)  # no teardown: the sandbox is orphaned, two jobs wait in the queue
    again = serve()
    for q in queued:  # nothing queued is lost: both run after the restart
        assert again.wait_for(q, "succeeded", token)["state"] == "succeeded"
    assert any("recovered: 1 job(s)" in line and job_id in line for line in again.lines), again.lines
    assert _owned_by(docker_client, s.proc.pid) == ([], [])  # reaped at start
    job = again.cli_json("jobs", "show", job_id, token=token)["job"]
    assert job["state"] == "interrupted"
    logs = again.cli("jobs", "logs", job_id, token=token)
    assert logs.returncode == 0, logs.stderr
    assert "WARN" in logs.stdout and "controller:" in logs.stdout
    assert "orphaned sandboxes reaped at restart (docker: 1 container(s)" in logs.stdout
    assert again.stop() == 0
    assert list(state_dir.iterdir()) == []

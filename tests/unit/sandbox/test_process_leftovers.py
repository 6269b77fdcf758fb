"""A job's runner never outlives its controller on the process backend, and a resume confirms it.

The controller here is a real Python process running a job's turn through ``ProcessBackend``
(a bash tool that records its pid and sleeps). The test SIGKILLs that process, as a crash
would: the runner learns of it (``--exit-with-parent``), cancels its turn, which kills the
tool's tree, and exits. ``ensure_gone`` stops what is left of a job and confirms it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from airlock.sandbox.process import ProcessBackend, _leftovers
from airlock.sandbox.process._leftovers import JOB_MARKER, job_runners
from layer0 import EnvError

pytestmark = pytest.mark.timeout(120)
CONTROLLER = textwrap.dedent(
    """
    import asyncio, sys
    from airlock.sandbox import SandboxRequest
    from airlock.sandbox.process import ProcessBackend
    from airlock.testing import bash_agent
    from layer0 import EnvironmentSpec, ProcessIsolation, TurnInput

    command = f"echo $$ > {sys.argv[1]}; exec sleep 300"
    request = SandboxRequest.compile(
        bash_agent(command), TurnInput.new("go"),
        EnvironmentSpec(isolation=[ProcessIsolation()]), job=sys.argv[2],
    )
    asyncio.run(ProcessBackend().run(request))
    """
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def wait_until(condition: object, what: str, limit_s: float = 30.0) -> None:
    """Poll ``condition()`` (a bound on waiting, not a timing claim)."""
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_crashed_controllers_runner_stops_and_kills_its_tools(tmp_path: Path) -> None:
    tool_pid_file = tmp_path / "tool.pid"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    controller = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(tool_pid_file), "j-crash"], env=env)
    try:
        wait_until(lambda: tool_pid_file.exists() and tool_pid_file.read_text().strip(), "the tool started")
        tool = int(tool_pid_file.read_text())
        marked = job_runners("j-crash")  # the runner, and its tools: they inherit the marker
        assert tool in marked and len(marked) >= 2 and alive(tool)
        controller.kill()  # SIGKILL: no teardown runs in the controller
        controller.wait()
        wait_until(lambda: not job_runners("j-crash"), "the orphaned runner and its tools stopped")
        wait_until(lambda: not alive(tool), "the orphaned runner's tool was killed")
    finally:
        if controller.poll() is None:
            controller.kill()


def _marked(job: str, *, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    code = "import signal, time\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(300)\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, JOB_MARKER: job}, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


async def test_ensure_gone_stops_the_jobs_runners_and_no_others() -> None:
    mine, other = _marked("j-1"), _marked("j-2")
    try:
        await ProcessBackend().ensure_gone("j-1")
        assert mine.wait(timeout=5) == -signal.SIGTERM
        assert other.poll() is None and job_runners("j-2") == [other.pid]
        await ProcessBackend().ensure_gone("j-none")  # nothing of it: returns at once
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()


async def test_a_runner_that_will_not_stop_blocks_the_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_leftovers, "WAIT_S", 0.5)
    stubborn = _marked("j-stuck", ignore_term=True)
    try:
        with pytest.raises(EnvError) as info:
            await ProcessBackend().ensure_gone("j-stuck")
        assert info.value.kind == "provision_failed" and str(stubborn.pid) in str(info.value)
    finally:
        stubborn.kill()
        stubborn.wait()
    await asyncio.sleep(0)

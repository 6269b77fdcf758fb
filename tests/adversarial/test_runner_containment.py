"""Tool processes in a real sandbox: they can neither ptrace nor read the runner, and
background processes (even ones that called setsid) do not outlive their bash call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox.docker import DockerEnvironment
from airlock.testing import bash_agent
from airlock.turn import ToolFinished
from layer0 import EnvironmentSpec, ExitReason, TurnInput
from tests.support.containers import sandbox_turn
from tests.support.probes import trace_probe_command

pytestmark = [pytest.mark.docker, pytest.mark.attack("runner")]

#: Runs inside the sandbox: the trace probe aimed at the runner (found through /proc).
PROBE = trace_probe_command()

#: ``setsid`` (the image has no util-linux): runs its arguments in a new session.
DETACH = (
    "detach() { /opt/venv/bin/python -c "
    "'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \"$@\"; }; "
)

#: Writes ``sleepers.py`` to the workspace: it prints the pid of every process whose argv is
#: exactly ``sleep 300`` (there is no ps in the image).
WRITE_LISTER = r"""cat > sleepers.py <<'EOF'
import os
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", b"300"]:
                    print(entry)
        except OSError:
            pass
EOF
"""
SLEEPERS = "/opt/venv/bin/python sleepers.py"

#: Three sleepers that leave the command's session (directly, with output closed, and after
#: a double fork); the command ends once all three run.
START_SLEEPERS = (
    WRITE_LISTER
    + DETACH
    + "detach sleep 300 & detach sleep 300 >/dev/null 2>&1 & (detach sh -c 'sleep 300 &' &)\n"
    + f"for i in $(seq 200); do [ $({SLEEPERS} | wc -l) -ge 3 ] && break; sleep 0.05; done\n"
    + f"echo running: $({SLEEPERS} | wc -l)"
)


async def run_tools(env: DockerEnvironment, tmp_path: Path, *commands: str) -> list[dict[str, Any]]:
    """Run one turn whose agent runs ``commands`` with bash; the parsed tool results."""
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    out = await env.run(
        sandbox_turn(bash_agent(*commands), tmp_path), TurnInput.new("go"), EnvironmentSpec(), events=sink
    )
    assert out.exit_reason == ExitReason.complete()
    return [json.loads(e.output) for e in events if isinstance(e, ToolFinished)]


async def test_a_tool_cannot_ptrace_or_read_the_runner(
    env: DockerEnvironment, tmp_path: Path, isolation: str
) -> None:
    (probe,) = await run_tools(env, tmp_path, PROBE)
    assert probe["exit_code"] == 0, probe
    found = json.loads(probe["stdout"])
    assert isinstance(found["target"], int), found
    assert found["attach"] == "EPERM"
    assert found["process_vm_readv"] == "EPERM"
    assert found["mem"] == "EACCES"
    if isolation == "gvisor":
        # gVisor's /proc ignores the runner's non-dumpable flag for environ (not for mem):
        # what it shows is the sandbox's own environment, which every tool inherits anyway.
        assert found["environ"] in ("EACCES", "opened")
    else:
        assert found["environ"] == "EACCES"


async def test_a_setsid_background_process_does_not_outlive_its_call(
    env: DockerEnvironment, tmp_path: Path
) -> None:
    started, listed = await run_tools(
        env,
        tmp_path,
        START_SLEEPERS,
        f"{SLEEPERS}; echo listed",
    )
    assert started["exit_code"] == 0 and started["stdout"] == "running: 3\n", started
    assert listed["stdout"] == "listed\n", listed

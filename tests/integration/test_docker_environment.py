"""DockerEnvironment against the real engine: end to end, hardening seen from inside, limits,
isolation refusals and teardown in every ending."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox.docker import DockerEnvironment
from airlock.testing import bash_agent
from airlock.turn import ToolFinished, ToolStarted
from layer0 import (
    EnvError,
    EnvironmentSpec,
    ExitReason,
    GvisorIsolation,
    MicroVmIsolation,
    ResourceLimits,
    TurnConfig,
    TurnInput,
    TurnOutput,
)
from tests.support.containers import assert_clean, sandbox_turn

pytestmark = pytest.mark.docker


def without_durations(output: TurnOutput) -> dict[str, Any]:
    data = output.model_dump(mode="json")
    data["metadata"].pop("duration")
    for call in data["metadata"]["tools_called"]:
        call.pop("duration")
    return data


def tool_results(events: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(e.output) for e in events if isinstance(e, ToolFinished)]


async def test_same_output_as_in_process(env: DockerEnvironment, tmp_path: Path, docker_client: Any) -> None:
    spec = bash_agent(
        "echo hello from $(cat /etc/hostname)", "printf 'x%.0s' 1 2 3 > f && wc -c < f", final="all done"
    )
    turn = sandbox_turn(spec, tmp_path)
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    inside = await env.run(turn, TurnInput.new("go"), EnvironmentSpec(), events=sink)
    local = await sandbox_turn(spec, tmp_path).execute(TurnInput.new("go"))
    assert inside.exit_reason == ExitReason.complete()
    assert inside.message.as_text() == "all done"
    # Same output, except wall-clock durations; the tool *results* differ only by host name.
    assert without_durations(inside) == without_durations(local)
    assert [type(e).__name__ for e in events if isinstance(e, ToolStarted | ToolFinished)] == [
        "ToolStarted",
        "ToolFinished",
        "ToolStarted",
        "ToolFinished",
    ]
    results = tool_results(events)
    assert results[0]["stdout"] == "hello from sandbox\n"
    assert results[1]["stdout"].strip() == "3"
    assert_clean(docker_client, env.sandbox.state_dir)


NO_NEW_PRIVS = "python3 -c 'import ctypes; print(\"NoNewPrivs\", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'"
INTERFACES = "python3 -c 'import socket; print(*[n for _, n in socket.if_nameindex()])'"


async def test_hardening_observed_from_inside(env: DockerEnvironment, tmp_path: Path, isolation: str) -> None:
    spec = bash_agent(
        "id -u; id -g",
        f"grep -E '^(CapEff|CapPrm|CapBnd|Seccomp):' /proc/self/status; {NO_NEW_PRIVS}",
        "touch /usr/x; echo rc=$?; touch /workspace/ok && echo workspace-writable",
        "uname -r; cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes",
        f"{INTERFACES}; ls /run/airlock; echo rc=$?",
        "cat /proc/1/comm; grep -E ' /(workspace|tmp)? ' /proc/mounts",
    )
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    out = await env.run(
        sandbox_turn(spec, tmp_path),
        TurnInput.new("probe"),
        EnvironmentSpec(resources=ResourceLimits(memory="300Mi")),
        events=sink,
    )
    assert out.exit_reason == ExitReason.complete()
    ids, caps, files, kernel, net, init = tool_results(events)
    assert ids["stdout"].split() == ["65534", "65534"]
    status = dict(line.replace(":\t", " ").split(" ", 1) for line in caps["stdout"].splitlines())
    assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # a seccomp filter is on (the engine's, or gVisor's own)
    assert "rc=1" in files["stdout"] and "workspace-writable" in files["stdout"]
    root = next(line.split() for line in init["stdout"].splitlines() if line.split()[1:2] == ["/"])
    assert "ro" in root[3].split(",")  # the root filesystem is mounted read-only
    assert net["stdout"].split()[0] == "lo" and "rc=2" in net["stdout"]  # no interfaces; control dir locked
    assert "size=262144k" in init["stdout"] and "noexec" in init["stdout"]
    if isolation == "gvisor":
        # gVisor's own kernel answers; the limits are the sandbox's host cgroup, not visible inside.
        assert kernel["stdout"].split()[0] == "4.4.0"
        assert "Invalid argument" in net["stderr"] or "Permission denied" in net["stderr"]
        assert init["stdout"].splitlines()[0] == "python"  # the runner is PID 1 (the subreaper)
        assert "Permission denied" in files["stderr"]  # gVisor checks permission before read-only
    else:
        assert "Read-only file system" in files["stderr"]
        assert kernel["stdout"].split()[1:] == ["256", str(300 * 2**20)]
        assert "Permission denied" in net["stderr"]
        assert init["stdout"].splitlines()[0] in ("docker-init", "tini")


async def test_memory_hog_is_resource_exceeded(
    env: DockerEnvironment, tmp_path: Path, docker_client: Any
) -> None:
    spec = bash_agent("python3 -c 'x = bytearray(600 * 2**20); print(len(x))'")
    with pytest.raises(EnvError) as e:
        await env.run(
            sandbox_turn(spec, tmp_path),
            TurnInput.new("eat"),
            EnvironmentSpec(resources=ResourceLimits(memory="128Mi")),
        )
    assert e.value.kind == "resource_exceeded"
    assert "memory" in str(e.value) and "128Mi" in str(e.value)
    assert_clean(docker_client, env.sandbox.state_dir)


FORK_LOOP = r"""python3 - <<'EOF'
import os, signal, time
kids = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            os.close(1); os.close(2); time.sleep(30); os._exit(0)
        kids.append(pid)
except OSError as e:
    print("fork failed after", len(kids), "children:", e.strerror)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
EOF"""


async def test_fork_loop_is_contained(env: DockerEnvironment, tmp_path: Path, isolation: str) -> None:
    spec = bash_agent(FORK_LOOP, "echo still alive", final="survived")
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    # Under gVisor each sandboxed process also costs host memory (≈4 MiB on the ptrace
    # platform): 256 Pythons need more than the default 512Mi, or the turn ends as
    # resource_exceeded (memory) before the process cap (the adversarial suite covers that).
    memory = "1536Mi" if isolation == "gvisor" else None
    spec_env = EnvironmentSpec(resources=ResourceLimits(memory=memory))
    out = await env.run(sandbox_turn(spec, tmp_path), TurnInput.new("fork"), spec_env, events=sink)
    assert out.exit_reason == ExitReason.complete() and out.message.as_text() == "survived"
    forks, alive = tool_results(events)
    words = forks["stdout"].split()
    assert words[:3] == ["fork", "failed", "after"], forks
    assert 0 < int(words[3]) < 256  # the pids limit (256 for the whole sandbox) stopped it
    assert "Resource temporarily unavailable" in forks["stdout"]
    assert alive["stdout"] == "still alive\n"


async def test_env_timeout_kills_the_sandbox(
    runner_image: str, state_dir: Path, tmp_path: Path, docker_client: Any
) -> None:
    env = DockerEnvironment(image=runner_image, state_dir=state_dir, sweep=False, turn_timeout=3)
    began = time.monotonic()
    out = await env.run(
        sandbox_turn(bash_agent("sleep 60"), tmp_path), TurnInput.new("wait"), EnvironmentSpec()
    )
    elapsed = time.monotonic() - began
    assert out.exit_reason == ExitReason.timeout()
    assert "killed" in (out.message.as_text() or "")
    # Killed at the deadline, long before the command's 60 s (the bound leaves a busy engine
    # room to create and remove the container: this is not a timing claim).
    assert 3 <= elapsed < 30
    assert_clean(docker_client, state_dir)


async def test_max_duration_times_out(
    runner_image: str, state_dir: Path, tmp_path: Path, docker_client: Any
) -> None:
    env = DockerEnvironment(image=runner_image, state_dir=state_dir, sweep=False, timeout_grace=1)
    began = time.monotonic()
    out = await env.run(
        sandbox_turn(bash_agent("sleep 60"), tmp_path),
        TurnInput.new("wait", config=TurnConfig(max_duration=1500)),
        EnvironmentSpec(),
    )
    assert out.exit_reason == ExitReason.timeout()
    assert time.monotonic() - began < 30  # long before the command's 60 s
    assert_clean(docker_client, state_dir)


async def test_failure_tears_down(env: DockerEnvironment, tmp_path: Path, docker_client: Any) -> None:
    spec = bash_agent("echo one")
    broken = spec.model_copy(
        update={"provider": spec.provider.model_copy(update={"script": spec.provider.script[:1]})}  # type: ignore[index]
    )
    with pytest.raises(EnvError) as e:
        await env.run(sandbox_turn(broken, tmp_path), TurnInput.new("go"), EnvironmentSpec())
    assert e.value.kind == "turn_error"
    assert_clean(docker_client, env.sandbox.state_dir)


async def test_cancel_tears_down(env: DockerEnvironment, tmp_path: Path, docker_client: Any) -> None:
    started = asyncio.Event()

    async def sink(event: Any) -> None:
        if isinstance(event, ToolStarted):
            started.set()

    task = asyncio.create_task(
        env.run(
            sandbox_turn(bash_agent("sleep 60"), tmp_path),
            TurnInput.new("go"),
            EnvironmentSpec(),
            events=sink,
        )
    )
    await asyncio.wait_for(started.wait(), 30)
    assert len(docker_client.containers.list(filters={"label": "airlock.sandbox"})) >= 1
    task.cancel()
    began = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - began < 5
    assert_clean(docker_client, env.sandbox.state_dir)


async def test_cancel_during_provisioning_leaves_nothing(
    env: DockerEnvironment, tmp_path: Path, docker_client: Any
) -> None:
    for delay in (0.0, 0.05, 0.15, 0.3):
        task = asyncio.create_task(
            env.run(sandbox_turn(bash_agent("true"), tmp_path), TurnInput.new("go"), EnvironmentSpec())
        )
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises((asyncio.CancelledError, EnvError)):
            await task
        assert_clean(docker_client, env.sandbox.state_dir)


async def test_missing_image_names_the_build_command(state_dir: Path, tmp_path: Path) -> None:
    env = DockerEnvironment(image="airlock-runner:0.0.0-missing", state_dir=state_dir, sweep=False)
    with pytest.raises(EnvError) as e:
        await env.run(sandbox_turn(bash_agent("true"), tmp_path), TurnInput.new("go"), EnvironmentSpec())
    assert e.value.kind == "provision_failed" and "airlock images build" in str(e.value)


async def test_start_timeout_reports_log_lines(
    runner_image: str, state_dir: Path, tmp_path: Path, docker_client: Any
) -> None:
    env = DockerEnvironment(image=runner_image, state_dir=state_dir, sweep=False, start_timeout=0.05)
    with pytest.raises(EnvError) as e:
        await env.run(sandbox_turn(bash_agent("true"), tmp_path), TurnInput.new("go"), EnvironmentSpec())
    assert e.value.kind == "provision_failed"
    assert "did not become ready" in str(e.value) and "last log lines" in str(e.value)
    assert_clean(docker_client, state_dir)


@pytest.mark.parametrize("boundary", [GvisorIsolation(), MicroVmIsolation()])
async def test_absent_runtime_is_isolation_violation(
    env: DockerEnvironment, tmp_path: Path, docker_client: Any, boundary: Any
) -> None:
    runtimes = set(docker_client.info().get("Runtimes", {}))
    spec = EnvironmentSpec(isolation=[boundary])
    if {"runsc"} & runtimes and boundary.type == "gvisor":  # the engine has it: it must really be used
        out = await env.run(sandbox_turn(bash_agent("dmesg | head -1"), tmp_path), TurnInput.new("go"), spec)
        assert out.exit_reason == ExitReason.complete()
        return
    with pytest.raises(EnvError) as e:
        await env.run(sandbox_turn(bash_agent("true"), tmp_path), TurnInput.new("go"), spec)
    assert e.value.kind == "isolation_violation"
    assert ("runsc" if boundary.type == "gvisor" else "Kata") in str(e.value)
    assert_clean(docker_client, env.sandbox.state_dir)

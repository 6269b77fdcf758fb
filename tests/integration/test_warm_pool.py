"""The Docker backend's warm pool against the real engine: claims, refills, never a reused
sandbox, no secret in a member before its claim, credentials bound late, reaping after a
crashed controller, cold starts on a mismatch, and ``size: 0`` behaving as no pool."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from airlock.policy import EnvSecretResolver, SidecarRoute
from airlock.sandbox import PoolSettings, SandboxRequest, WarmPool, compile_sandbox_plan
from airlock.sandbox.docker import DockerBackend, DockerSettings, reap_orphans
from airlock.sandbox.docker._warm import LABEL_POOL
from airlock.testing import bash_agent
from airlock.turn import ToolFinished
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    ExitReason,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    ResourceLimits,
    TurnInput,
    TurnOutput,
)
from tests.support.containers import my_containers
from tests.support.provisions import recorded_provisions

pytestmark = pytest.mark.docker

SECRET_FILE = "/run/secrets/deploy-key"
VALUES = {"API_TOKEN": "env-secret-Zq81vX0pl3", "DEPLOY_KEY": "file-secret-Hh27cN4ma9"}
CREDENTIALS = EnvironmentSpec(
    credentials=[
        CredentialRef(name="api-token", injection=CredentialInjection.env_var("API_TOKEN")),
        CredentialRef(name="deploy-key", injection=CredentialInjection.file(SECRET_FILE)),
    ]
)


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def members(client: Any) -> list[Any]:
    return [c for c in my_containers(client) if LABEL_POOL in c.labels]


@pytest.fixture
async def pool() -> AsyncIterator[WarmPool[Any]]:
    p: WarmPool[Any] = WarmPool(PoolSettings(size=2, refill_concurrency=2), name="docker")
    yield p
    await p.aclose()


def sandbox_for(
    runner_image: str, state_dir: Path, pool: WarmPool[Any] | None, isolation: str = "container"
) -> DockerBackend:
    return DockerBackend(
        image=runner_image,
        state_dir=state_dir,
        sweep=False,
        pool=pool,
        secrets=EnvSecretResolver(VALUES),
        settings=DockerSettings(isolation_floor="gvisor" if isolation == "gvisor" else "container"),
    )


async def run(
    sandbox: DockerBackend, spec: Any, environment: EnvironmentSpec
) -> tuple[TurnOutput, list[Any]]:
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    request = SandboxRequest.compile(spec, TurnInput.new("go"), environment, events=sink)
    return await sandbox.run(request), events


def stdout(events: list[Any]) -> list[str]:
    return [json.loads(e.output)["stdout"].strip() for e in events if isinstance(e, ToolFinished)]


async def warm(sandbox: DockerBackend, pool: WarmPool[Any], environment: EnvironmentSpec) -> None:
    assert await sandbox.warm(environment, compile_sandbox_plan(environment))
    assert await pool.wait_ready(60), pool.stats()


async def test_a_job_claims_a_warm_sandbox_and_its_credentials_are_bound_late(
    runner_image: str, state_dir: Path, pool: WarmPool[Any], docker_client: Any, isolation: str
) -> None:
    sandbox = sandbox_for(runner_image, state_dir, pool, isolation)
    await warm(sandbox, pool, CREDENTIALS)
    waiting = members(docker_client)
    assert len(waiting) == 2
    # Before a claim: no value anywhere the engine or the host holds for the member.
    for c in waiting:
        inspected = json.dumps(docker_client.api.inspect_container(c.id))
        assert not any(v in inspected for v in VALUES.values())
        assert "API_TOKEN" not in inspected
        assert not any(v in bytes(c.logs()).decode(errors="replace") for v in VALUES.values())
        files = state_dir / f"{c.labels['airlock.sandbox']}.files"
        assert [p.read_bytes() for p in files.iterdir()] == [b""]
    spec = bash_agent(
        'printf %s "$API_TOKEN" | sha256sum',
        f"cat {SECRET_FILE} | sha256sum; stat -c %a {SECRET_FILE}",
        "cat /etc/hostname",
    )
    output, events = await run(sandbox, spec, CREDENTIALS)
    assert output.exit_reason == ExitReason.complete()
    env_hash, file_lines, host = stdout(events)
    assert env_hash.split()[0] == sha(VALUES["API_TOKEN"])
    assert file_lines.split()[0] == sha(VALUES["DEPLOY_KEY"]) and file_lines.split()[-1] == "400"
    assert pool.stats().hits == 1 and pool.stats().misses == 0
    # The claimed member is gone with its job; the pool refilled behind it.
    await pool.settle()
    assert await pool.wait_ready(60)
    left = {c.id for c in members(docker_client)}
    assert len(left) == 2 and len(left & {c.id for c in waiting}) == 1
    assert host == "sandbox"


async def test_no_sandbox_is_used_twice(
    runner_image: str, state_dir: Path, pool: WarmPool[Any], docker_client: Any
) -> None:
    sandbox = sandbox_for(runner_image, state_dir, pool)
    environment = EnvironmentSpec()
    await warm(sandbox, pool, environment)
    claimed: set[str] = set()
    with recorded_provisions() as provisions:
        await three_jobs(sandbox, pool, docker_client, environment, claimed)
    assert provisions.seen == [("docker", "warm")] * 3  # reported as the jobs' (not the refills')
    assert pool.stats().hits == 3
    assert pool.stats().started == 5  # 2 up front, one refill per claim


async def three_jobs(
    sandbox: DockerBackend,
    pool: WarmPool[Any],
    docker_client: Any,
    environment: EnvironmentSpec,
    claimed: set[str],
) -> None:
    """Three jobs in turn, each in a member no job used before."""
    for i in range(3):
        before = {c.id for c in members(docker_client)}
        spec = bash_agent("ls -A /workspace", f"echo job{i} > /workspace/mark")
        output, events = await run(sandbox, spec, environment)
        assert output.exit_reason == ExitReason.complete()
        assert stdout(events)[0] == ""  # nothing of an earlier job
        await pool.settle()
        used = before - {c.id for c in members(docker_client)}
        assert len(used) == 1 and not used & claimed
        claimed |= used
        assert docker_client.containers.list(all=True, filters={"id": next(iter(used))}) == []
        assert await pool.wait_ready(60)


async def test_a_shape_that_matches_no_pool_starts_cold(
    runner_image: str, state_dir: Path, pool: WarmPool[Any], docker_client: Any
) -> None:
    sandbox = sandbox_for(runner_image, state_dir, pool)
    await warm(sandbox, pool, EnvironmentSpec())
    waiting = {c.id for c in members(docker_client)}
    bigger = EnvironmentSpec(resources=ResourceLimits(memory="700Mi"))
    with recorded_provisions() as provisions:
        output, events = await run(sandbox, bash_agent("echo cold"), bigger)
    assert provisions.seen == [("docker", "cold")]
    assert output.exit_reason == ExitReason.complete()
    assert stdout(events) == ["cold"]
    assert (pool.stats().hits, pool.stats().misses) == (0, 0)  # not pooled: not a miss either
    assert {c.id for c in members(docker_client)} == waiting  # the pool was not touched


async def test_a_sandbox_with_a_network_waits_with_its_proxy_unconfigured(
    runner_image: str, state_dir: Path, pool: WarmPool[Any], docker_client: Any
) -> None:
    """No traffic: the rule names an address nothing here uses, and no job runs. The claims
    themselves (rules, sidecar secrets, egress) run the network attacks in warm sandboxes
    (``tests/adversarial/test_network.py``, ``[warm-…]``)."""
    sandbox = sandbox_for(runner_image, state_dir, pool)
    networked = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination="10.213.254.1/32", port=9, action=NetworkAction.ALLOW)],
        ),
        credentials=[CredentialRef(name="side-key", injection=CredentialInjection.sidecar())],
    )
    routes = {"side-key": SidecarRoute(upstream="http://10.213.254.1:9", header="x-key")}
    assert await sandbox.warm(networked, compile_sandbox_plan(networked, routes))
    assert await pool.wait_ready(60), pool.stats()
    containers = my_containers(docker_client)
    roles = sorted(c.labels.get("airlock.role", "sandbox") for c in containers)
    assert roles == ["proxy", "proxy", "sandbox", "sandbox"]
    for c in containers:
        if c.labels.get("airlock.role") == "proxy":
            assert "waiting for its configuration" in bytes(c.logs()).decode()
            proxy_dir = state_dir / f"{c.labels['airlock.sandbox']}.proxy"
            assert sorted(p.name for p in proxy_dir.iterdir()) == ["events.sock"]  # no rules, no secret


async def test_pool_size_zero_behaves_as_no_pool(
    runner_image: str, state_dir: Path, docker_client: Any
) -> None:
    empty: WarmPool[Any] = WarmPool(PoolSettings(size=0))
    sandbox = sandbox_for(runner_image, state_dir, empty)
    assert not await sandbox.warm(CREDENTIALS, compile_sandbox_plan(CREDENTIALS))
    output, events = await run(sandbox, bash_agent('printf %s "$API_TOKEN" | sha256sum'), CREDENTIALS)
    assert output.exit_reason == ExitReason.complete()
    assert stdout(events)[0].split()[0] == sha(VALUES["API_TOKEN"])
    assert members(docker_client) == [] and empty.stats().started == 0
    await empty.aclose()


async def test_close_removes_every_waiting_member(
    runner_image: str, state_dir: Path, docker_client: Any
) -> None:
    p: WarmPool[Any] = WarmPool(PoolSettings(size=3, refill_concurrency=3))
    sandbox = sandbox_for(runner_image, state_dir, p)
    await warm(sandbox, p, CREDENTIALS)
    assert len(members(docker_client)) == 3
    await p.aclose()
    assert members(docker_client) == []
    assert await asyncio.to_thread(lambda: list(state_dir.iterdir())) == []


CRASHING_CONTROLLER = textwrap.dedent(
    """
    import asyncio, pathlib, sys
    from airlock.sandbox import PoolSettings, WarmPool, compile_sandbox_plan
    from airlock.sandbox.docker import DockerBackend
    from layer0 import EnvironmentSpec

    async def main():
        pool = WarmPool(PoolSettings(size=2))
        state_dir = pathlib.Path(sys.argv[2])
        sandbox = DockerBackend(image=sys.argv[1], state_dir=state_dir, sweep=False, pool=pool)
        spec = EnvironmentSpec()
        await sandbox.warm(spec, compile_sandbox_plan(spec))
        assert await pool.wait_ready(60)
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_members_of_a_crashed_controller_are_reaped(
    runner_image: str, state_dir: Path, docker_client: Any
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_CONTROLLER, runner_image, str(state_dir), stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 90)
        assert line.strip() == b"ready"
        owner = f"airlock.owner={os.uname().nodename}:{proc.pid}"
        orphans = docker_client.containers.list(all=True, filters={"label": owner})
        assert len(orphans) == 2 and all(LABEL_POOL in c.labels for c in orphans)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    report = await asyncio.to_thread(reap_orphans, docker_client, state_dir)
    assert len(report.containers) == 2
    assert docker_client.containers.list(all=True, filters={"label": owner}) == []
    assert await asyncio.to_thread(lambda: list(state_dir.iterdir())) == []

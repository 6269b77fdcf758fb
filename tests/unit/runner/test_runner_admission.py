"""Admission of Executes over real gRPC. An execution id is reserved the moment its Execute is
accepted, before the concurrency check and any await, until that Execute's stream ends; a
second Execute with the id meanwhile is ALREADY_EXISTS (``duplicate``), whatever
--max-concurrent is. A slot is taken before any await too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from airlock.runner import RunnerConfig, RunnerServer
from airlock.runner._fence import NetworkFence

from .runner_streams import HANG_GUARD_S, Runner, gated_step, open_gate, request


@pytest.fixture(params=[1, 2], ids=["max-concurrent-1", "max-concurrent-2"])
async def runner(request: pytest.FixtureRequest, token: str, workspace: Path) -> AsyncIterator[Runner]:
    server = RunnerServer(RunnerConfig(token=token, workspace=workspace, max_concurrent=request.param))
    address = await server.start("127.0.0.1:0")
    client = Runner(address, token)
    try:
        yield client
    finally:
        await client.close()
        await server.stop(grace=1.0)


async def test_two_concurrent_executes_with_one_id_run_once(runner: Runner, workspace: Path) -> None:
    streams = [runner.execute(request([gated_step("go", "a")], "same")) for _ in range(2)]
    await asyncio.gather(*(s.running_or_ended() for s in streams))
    refused = [s for s in streams if s.error is not None]
    running = [s for s in streams if s.error is None]
    assert len(refused) == 1 and len(running) == 1, [(s.kinds, s.error) for s in streams]
    assert refused[0].error is not None and refused[0].error.code() == grpc.StatusCode.ALREADY_EXISTS
    assert refused[0].reason() == "duplicate"

    # The refused call did not free the id: it stays reserved while the first one runs.
    third = runner.execute(request([], "same"))
    await third.end()
    assert third.error is not None and third.error.code() == grpc.StatusCode.ALREADY_EXISTS

    open_gate(workspace, "go")
    kinds = await running[0].end()
    assert kinds[-1] == "output", (kinds, running[0].error)
    assert kinds.count("started") == 1

    # Once the stream that used it has ended, the id is free again.
    again = runner.execute(request([], "same"))
    assert (await again.end())[-1] == "output", again.error


async def test_a_refused_execute_frees_its_id(runner: Runner) -> None:
    bad = request([], "once")
    bad.ClearField("input")
    refused = runner.execute(bad)
    await refused.end()
    assert refused.error is not None and refused.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    retried = runner.execute(request([], "once"))
    assert (await retried.end())[-1] == "output", retried.error


async def test_the_slot_is_taken_before_the_fence_is_awaited(
    token: str, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting: list[str] = []
    gate = asyncio.Event()

    async def pending_check(self: NetworkFence) -> list[str]:  # the fence's first check, still running
        waiting.append("execute")
        await gate.wait()
        return []

    monkeypatch.setattr(NetworkFence, "breaches", pending_check)
    server = RunnerServer(RunnerConfig(token=token, workspace=workspace, max_concurrent=1))
    client = Runner(await server.start("127.0.0.1:0"), token)
    try:
        streams = [client.execute(request([], f"ex-{i}")) for i in range(2)]
        async with asyncio.timeout(HANG_GUARD_S):
            while len(waiting) < 2 and not any(s.task.done() for s in streams):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        gate.set()
        ends = [await s.end() for s in streams]
    finally:
        await client.close()
        await server.stop(grace=1.0)
    assert sorted(bool(kinds) and kinds[-1] == "output" for kinds in ends) == [False, True], ends
    refused = next(s for s in streams if s.error is not None)
    assert refused.error is not None and refused.error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert refused.reason() == "busy"

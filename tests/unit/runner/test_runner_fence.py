"""The runner's network fence: an address it must not reach that accepts a connection refuses
every turn (FAILED_PRECONDITION, ``airlock-reason: isolation``), which the sandbox layer
reports as ``isolation_violation``. Every address is a listener this test starts on loopback
(one accepting, one closed port), so nothing leaves the machine."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.errors import RunnerError
from airlock.runner import RemoteTurn, RunnerConfig, RunnerServer, fence_breached
from airlock.sandbox._lifecycle import execute
from layer0 import EnvError, TurnError, TurnInput

from .runner_helpers import scripted_spec, text_step


@pytest.fixture
async def listener() -> AsyncIterator[str]:
    """An address that accepts connections (what a reachable metadata service looks like)."""
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def closed() -> str:
    """An address nothing listens on (a refused connection: the fence holds)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def serve(token: str, workspace: Path, fence: tuple[str, ...]) -> RunnerServer:
    server = RunnerServer(RunnerConfig(token=token, workspace=workspace, fence=fence, fence_timeout_s=0.5))
    await server.start("127.0.0.1:0")
    return server


async def test_a_reachable_fence_address_refuses_every_turn(
    token: str, workspace: Path, listener: str, closed: str
) -> None:
    server = await serve(token, workspace, (closed, listener))
    assert server.address is not None
    try:
        async with RemoteTurn(server.address, token, scripted_spec([text_step("hi")])) as turn:
            assert await turn.health() == "SERVING"  # health stays up: the controller must learn why
            with pytest.raises(TurnError) as info:
                await turn.execute(TurnInput.new("go"))
    finally:
        await server.stop(grace=1.0)
    why = fence_breached(info.value)
    assert why is not None and listener in why and closed not in why


async def test_closed_addresses_let_the_turn_run(token: str, workspace: Path, closed: str) -> None:
    server = await serve(token, workspace, (closed,))
    assert server.address is not None
    try:
        async with RemoteTurn(server.address, token, scripted_spec([text_step("ran")])) as turn:
            output = await turn.execute(TurnInput.new("go"))
    finally:
        await server.stop(grace=1.0)
    assert output.message.as_text() == "ran"


async def test_the_sandbox_layer_reports_a_breach_as_an_isolation_violation(
    token: str, workspace: Path, listener: str
) -> None:
    server = await serve(token, workspace, (listener,))
    assert server.address is not None

    class Box:  # a SandboxInstance that adds nothing to the turn's failure
        name = "sandbox t"

        def __init__(self, remote: RemoteTurn) -> None:
            self.remote = remote

        async def wait_ready(self) -> None:
            return None

        async def stop(self) -> None:
            return None

        async def failure(self, e: TurnError) -> EnvError:
            return EnvError.from_turn_error(e)

        async def after_turn(self) -> None:
            return None

        async def teardown(self) -> None:
            return None

    try:
        remote = RemoteTurn(server.address, token, scripted_spec([text_step("hi")]))
        with pytest.raises(EnvError) as info:
            await execute(Box(remote), TurnInput.new("go"), None, 10.0)
    finally:
        await server.stop(grace=1.0)
    assert info.value.kind == "isolation_violation" and listener in str(info.value)


def test_a_fence_address_without_a_port_is_refused(token: str, workspace: Path) -> None:
    with pytest.raises(RunnerError, match="fence"):
        RunnerConfig(token=token, workspace=workspace, fence=("169.254.169.254",))

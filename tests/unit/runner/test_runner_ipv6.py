"""The runner on IPv6: what a sandbox pod whose IP is IPv6 needs (``--listen [::]:50051``).

Every runner here is started by the test on loopback; the tests skip (saying why) where
``::1`` cannot be bound.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from airlock.runner import RemoteTurn, RunnerConfig, RunnerServer, wait_until_serving
from airlock.runner.__main__ import TOKEN_ENV, StartupError, listen_address
from layer0 import TurnInput
from tests.support.ipv6 import needs_ipv6_loopback

from .runner_helpers import scripted_spec, text_step


@needs_ipv6_loopback
async def test_remote_turn_reaches_a_runner_on_ipv6_loopback(token: str, workspace: Path) -> None:
    async with RunnerServer(RunnerConfig(token=token, workspace=workspace)) as server:
        address = await server.start("[::1]:0")
        assert address.startswith("[::1]:")
        async with RemoteTurn(address, token, scripted_spec([text_step("over IPv6")])) as turn:
            output = await turn.execute(TurnInput.new("hi"))
    assert output.message.as_text() == "over IPv6"


@needs_ipv6_loopback
async def test_the_pods_listen_address_answers_on_both_families(token: str, workspace: Path) -> None:
    """``[::]:PORT`` (what the sandbox pod's runner listens on) is reached at an IPv6 and an
    IPv4 address of the host: gRPC binds the wildcard dual-stack."""
    async with RunnerServer(RunnerConfig(token=token, workspace=workspace)) as server:
        address = await server.start("[::]:0")
        port = address.rsplit(":", 1)[1]
        assert address == f"[::]:{port}"
        for target in (f"[::1]:{port}", f"127.0.0.1:{port}"):
            await wait_until_serving(target, 10)
            async with RemoteTurn(target, token, scripted_spec([text_step(target)])) as turn:
                output = await turn.execute(TurnInput.new("hi"))
            assert output.message.as_text() == target


def test_listen_takes_bracketed_ipv6_and_refuses_bare_ipv6() -> None:
    for good in ("[::]:50051", "[fd00:10:244::5]:50051", "0.0.0.0:50051", "unix:/run/airlock/runner.sock"):
        assert listen_address(good) == good
    for bad in ("::1:50051", "fd00::5", "50051", "[::1]:http"):
        with pytest.raises(StartupError, match="--listen"):
            listen_address(bad)


async def test_an_unbracketed_ipv6_listen_address_is_refused_by_name(tmp_path: Path) -> None:
    """gRPC would read ``::1:50051`` as another address; the runner says what to write."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.runner", "--listen", "::1:50051", "--workspace", str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, TOKEN_ENV: "t" * 32},
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert "write an IPv6 address in brackets ([::1]:50051)" in out.decode()

"""A token file the controller serves with is followed: when the file changes (a Kubernetes
Secret rotated by GitOps, which regenerates it, or by hand) the next RPC is checked against the
new token, without a restart; a file that turns unreadable or empty keeps the last good token.
Over real gRPC, with the controller the CLI's ``serve --token-file`` builds."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions
from airlock.controller._token_file import TokenFile
from airlock.jobs import ControllerClient, ControllerError
from tests.support.servers import free_port

CONFIG = """\
version: 1
agents:
  a:
    provider: {kind: scripted, script: []}
    backend: process
"""


def rotate(path: Path, token: str) -> None:
    """Replace the file as a Secret volume does: a new file renamed over the old one."""
    fresh = path.with_name(".fresh")
    fresh.write_text(token + "\n")
    os.replace(fresh, path)


async def accepted(address: str, token: str) -> bool:
    async with ControllerClient(address, token) as client:
        try:
            await client.agents()
        except ControllerError as e:
            assert e.code == "UNAUTHENTICATED", e
            return False
    return True


async def test_a_rotated_token_file_takes_effect_without_a_restart(tmp_path: Path) -> None:
    (tmp_path / "airlock.yaml").write_text(CONFIG)
    token = tmp_path / "secret" / "token"
    token.parent.mkdir()
    token.write_text("first-token\n")
    options = ControllerOptions(data_dir=tmp_path / "data", address="127.0.0.1:0", token_file=token)
    async with Controller(load_config(tmp_path / "airlock.yaml"), options) as controller:
        assert await accepted(controller.address, "first-token")
        rotate(token, "second-token")
        assert not await accepted(controller.address, "first-token")
        assert await accepted(controller.address, "second-token")
    assert not (tmp_path / "data" / "token").exists()  # a token file is never generated


async def test_an_emptied_or_removed_file_keeps_the_last_good_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("good-token\n")
    tokens = TokenFile(path)
    rotate(path, "")
    assert await tokens() == "good-token"
    path.unlink()
    assert await tokens() == "good-token"
    rotate(path, "newer-token")
    assert await tokens() == "newer-token"
    assert "newer-token" not in repr(tokens)


def test_a_missing_file_refuses_the_start(tmp_path: Path) -> None:
    from airlock.controller import ControllerServerError

    with pytest.raises(ControllerServerError, match="token file"):
        TokenFile(tmp_path / "absent")


async def test_serve_follows_its_token_file(tmp_path: Path) -> None:
    """``airlock serve --token-file`` (what the Helm chart runs, the file a mounted Secret)."""
    (tmp_path / "airlock.yaml").write_text(CONFIG)
    token = tmp_path / "token"
    token.write_text("first-token\n")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock", "serve", "--config", str(tmp_path / "airlock.yaml"),
        "--address", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), "--token-file", str(token),
        "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        started = json.loads(await proc.stdout.readline())
        address = started["address"]
        assert await accepted(address, "first-token")
        rotate(token, "second-token")
        assert await accepted(address, "second-token")
        assert not await accepted(address, "first-token")
    finally:
        proc.terminate()
        await proc.wait()

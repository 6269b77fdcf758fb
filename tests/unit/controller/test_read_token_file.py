"""``airlock serve --token-file``: the token from an existing file, never created or printed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.controller import ControllerServerError, read_token_file


def test_the_file_is_read_and_stripped(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("s3cret-token\n")
    assert read_token_file(path) == "s3cret-token"


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_missing_or_empty_is_refused_and_nothing_is_created(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ControllerServerError, match="token file"):
        read_token_file(path)
    assert path.exists() == (content is not None)


def test_serve_uses_it_and_never_prints_it(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken-from-a-secret\n")
    config = tmp_path / "airlock.yaml"
    config.write_text(
        json.dumps({"version": 1, "agents": {"a": {"provider": {"kind": "scripted", "script": []}}}})
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "airlock", "serve", "--config", str(config), "--address", f"127.0.0.1:{port}",
         "--data-dir", str(tmp_path / "data"), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "AIRLOCK_TOKEN_FILE": str(token)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert started["token_file"] == str(token) and started["token_created"] is False
    assert "token" not in started
    assert "t0ken-from-a-secret" not in json.dumps(started) + err
    assert not (tmp_path / "data" / "token").exists()

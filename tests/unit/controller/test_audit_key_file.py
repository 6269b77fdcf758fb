"""``airlock serve --audit-key-file``: controller replicas seal their turn records with one key
from an existing file (a mounted Secret), so each verifies the others' records; a missing,
short, malformed or shared-readable file is refused with its reason, and nothing is created."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions
from airlock.errors import ConfigError
from airlock.weave import RecordType, verify

CONFIG = """\
version: 1
agents:
  a:
    provider: {kind: scripted, script: []}
    backend: process
"""


def key_file(tmp_path: Path, text: str, mode: int = 0o600, name: str = "audit.key") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


def controller(tmp_path: Path, data: str, key: Path | None) -> Controller:
    (tmp_path / "airlock.yaml").write_text(CONFIG)
    options = ControllerOptions(data_dir=tmp_path / data, address="127.0.0.1:0", audit_key_file=key)
    return Controller(load_config(tmp_path / "airlock.yaml"), options)


async def test_controllers_with_one_key_file_verify_each_others_records(tmp_path: Path) -> None:
    shared = key_file(tmp_path, secrets.token_hex(32) + "\n", mode=0o400)
    async with (
        controller(tmp_path, "one", shared) as one,
        controller(tmp_path, "two", shared) as two,
        controller(tmp_path, "own", None) as own,
    ):
        assert one.service is not None and two.service is not None and own.service is not None
        for n in range(3):
            await one.service.weaves.record(
                "root", job="root", agent="a", type=RecordType.SPEECH, kind=f"t{n}"
            )
        records = await one.service.weaves.load("root")
        assert verify(records, two.service.weaves.key).ok
        assert verify(records, one.service.weaves.key).ok
        # A controller with its data dir's own key does not vouch for them.
        assert not verify(records, own.service.weaves.key).ok
    assert not (tmp_path / "one" / "audit.key").exists() and not (tmp_path / "two" / "audit.key").exists()
    assert (tmp_path / "own" / "audit.key").exists()


BAD: list[tuple[str, str | None, int, str]] = [
    ("missing", None, 0o600, "cannot read the audit key file"),
    ("short", "ab" * 16, 0o600, "holds 16 bytes; an audit key is at least 32"),
    ("empty", "\n", 0o600, "holds 0 bytes"),
    ("not hex", "z" * 64, 0o600, "is not hex"),
    ("group-readable", "ab" * 32, 0o640, "mode 0640) is open to others"),
    ("world-readable", "ab" * 32, 0o604, "mode 0604) is open to others"),
]


@pytest.mark.parametrize(("case", "text", "mode", "says"), BAD, ids=[b[0] for b in BAD])
async def test_a_bad_key_file_is_refused_and_nothing_is_created(
    tmp_path: Path, case: str, text: str | None, mode: int, says: str
) -> None:
    path = tmp_path / "audit.key" if text is None else key_file(tmp_path, text, mode)
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        async with controller(tmp_path, "data", path):
            pass
    assert not (tmp_path / "data" / "audit.key").exists()
    assert path.exists() == (text is not None)


@pytest.mark.skipif(os.getuid() != 0, reason="needs a root-owned file made here")
@pytest.mark.parametrize(("mode", "accepted"), [(0o440, True), (0o640, True), (0o444, False), (0o660, False)])
def test_a_secret_mounted_for_a_non_root_pod_is_roots_and_group_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int, accepted: bool
) -> None:
    """The kubelet mounts a Secret's file as root's, group fsGroup, mode 0440: a controller
    running as another user reads it by its group, as PostgreSQL reads root's key files."""
    from airlock.controller._weaving import read_audit_key_file

    path = key_file(tmp_path, "ab" * 32, mode)  # made by root
    monkeypatch.setattr(os, "getuid", lambda: 65534)
    if accepted:
        assert read_audit_key_file(path) == bytes.fromhex("ab" * 32)
    else:
        with pytest.raises(ConfigError, match="open to others"):
            read_audit_key_file(path)


def test_serve_takes_it_from_the_environment_and_refuses_a_bad_one(tmp_path: Path) -> None:
    (tmp_path / "airlock.yaml").write_text(CONFIG)
    short = key_file(tmp_path, "ab" * 8)
    done = subprocess.run(
        [sys.executable, "-m", "airlock", "serve", "--config", str(tmp_path / "airlock.yaml"),
         "--address", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "AIRLOCK_AUDIT_KEY_FILE": str(short)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "holds 8 bytes; an audit key is at least 32" in " ".join(done.stderr.split())
    assert not (tmp_path / "data" / "audit.key").exists()

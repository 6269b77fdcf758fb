"""The controller's data directory is private: what ``airlock serve`` (the Controller) and the
stores create there (SQLite files with their -wal/-shm, the token, the audit key) is for the
user only, and anything already there that others may use is named in a warning with its fix."""

from __future__ import annotations

import logging
import os
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions, SqliteJobStore, open_data_dir
from airlock.state import SqliteStore
from layer0 import Scope

CONFIG = """\
version: 1
agents:
  a:
    provider: {kind: scripted, script: []}
    backend: process
"""


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common umask (022): what is not created private ends up readable by others."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, str]:
    """Every file and directory under ``root`` (and itself; links left out) → its mode bits."""
    found = {".": f"{stat.S_IMODE(root.stat().st_mode):04o}"}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            mode = os.lstat(Path(folder, name)).st_mode
            if not stat.S_ISLNK(mode):
                found[str(Path(folder, name).relative_to(root))] = f"{stat.S_IMODE(mode):04o}"
    return found


def open_to_others(root: Path) -> dict[str, str]:
    return {name: mode for name, mode in modes(root).items() if int(mode, 8) & 0o077}


async def test_a_started_controller_keeps_everything_in_its_data_dir_private(tmp_path: Path) -> None:
    (tmp_path / "airlock.yaml").write_text(CONFIG)
    data = tmp_path / "state" / "controller"
    options = ControllerOptions(data_dir=data, address="127.0.0.1:0")
    async with Controller(load_config(tmp_path / "airlock.yaml"), options) as controller:
        assert controller.service is not None
        await controller.service.state.write(Scope.session("s1"), "history", ["a private conversation"])
        present = modes(data)
        for name in (
            "jobs.db",
            "jobs.db-wal",
            "state.db",
            "state.db-wal",
            "state.db-shm",
            "token",
            "audit.key",
        ):
            assert name in present, f"{name} was not made: {present}"
        assert open_to_others(data) == {}, present
    assert open_to_others(data) == {}


@pytest.mark.parametrize("store", [SqliteStore, SqliteJobStore])
async def test_a_store_creates_its_file_and_side_files_private(
    tmp_path: Path, store: type[SqliteStore | SqliteJobStore]
) -> None:
    async with store(tmp_path / "new" / "x.db"):
        assert {"x.db", "x.db-wal", "x.db-shm"} <= set(modes(tmp_path / "new"))
        assert open_to_others(tmp_path / "new") == {}


def test_what_is_already_there_is_named_with_its_fix_and_left_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "it's data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    (data / "state.db").write_text("")
    os.chmod(data / "state.db", 0o644)
    (data / "token").write_text("t")
    os.chmod(data / "token", 0o600)
    (data / "elsewhere").symlink_to(tmp_path)  # a link is not followed, nor reported
    with caplog.at_level(logging.WARNING, logger="airlock.controller"):
        assert open_data_dir(data) == data
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2, warned
    assert f"{data} in the controller's data directory is mode 0755" in warned[0]
    assert warned[0].endswith(f"make it private: chmod 700 {shlex.quote(str(data))}")
    assert f"{data / 'state.db'} in the controller's data directory is mode 0644" in warned[1]
    assert warned[1].endswith(f"make it private: chmod 600 {shlex.quote(str(data / 'state.db'))}")
    assert open_to_others(data) == {".": "0755", "state.db": "0644"}, "user files keep their mode"


def test_a_new_data_dir_is_private_and_a_private_one_is_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "a" / "b"
    with caplog.at_level(logging.WARNING, logger="airlock.controller"):
        open_data_dir(data)
        (data / "token").write_text("t")
        os.chmod(data / "token", 0o600)
        open_data_dir(data)
    assert modes(data) == {".": "0700", "token": "0600"}
    assert not caplog.records

"""Owner labels and the control-directory part of the reaper (no Docker needed)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from airlock.sandbox.docker._labels import (
    LABEL_CREATED_AT,
    LABEL_OWNER,
    LABEL_OWNER_START,
    LABEL_SANDBOX,
    Owner,
    current_owner,
    owner_is_gone,
    owner_labels,
    process_start,
)
from airlock.sandbox.docker._reaper import ReapReport, _reap_dirs, write_owner_file


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_labels() -> None:
    labels = owner_labels("sb-0123456789abcdef")
    assert labels[LABEL_SANDBOX] == "sb-0123456789abcdef"
    assert labels[LABEL_OWNER] == f"{socket.gethostname()}:{os.getpid()}"
    assert labels[LABEL_OWNER_START] == process_start(os.getpid())
    assert labels[LABEL_CREATED_AT].endswith("+00:00")


def test_owner_liveness() -> None:
    me = current_owner()
    assert not owner_is_gone(me)
    assert owner_is_gone(Owner(me.host, dead_pid(), "1"))
    assert owner_is_gone(Owner(me.host, os.getpid(), "1"))  # same pid, other start time: reused
    assert not owner_is_gone(Owner("some-other-host", dead_pid(), ""))  # can't tell: kept
    assert Owner.parse("host:12") == Owner("host", 12, "")
    assert Owner.parse("garbage") is None


def test_reap_dirs_removes_only_orphans(tmp_path: Path) -> None:
    gone = owner_labels("sb-00000000000000aa", Owner(socket.gethostname(), dead_pid(), "1"))
    live = owner_labels("sb-00000000000000bb")
    for sid, labels in (("sb-00000000000000aa", gone), ("sb-00000000000000bb", live)):
        write_owner_file(tmp_path, sid, labels)
        (tmp_path / sid).mkdir()
        (tmp_path / sid / "runner.sock").write_text("")
    (tmp_path / "unrelated").mkdir()

    def orphaned(labels: dict[str, str]) -> bool:
        owner = Owner.parse(labels[LABEL_OWNER], labels[LABEL_OWNER_START])
        return owner is not None and owner_is_gone(owner)

    report = ReapReport()
    _reap_dirs(tmp_path, orphaned, report)
    assert report.directories == [str(tmp_path / "sb-00000000000000aa")]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "sb-00000000000000bb",
        "sb-00000000000000bb.owner",
        "unrelated",
    ]
    assert (
        json.loads((tmp_path / "sb-00000000000000bb.owner").read_text())[LABEL_SANDBOX]
        == "sb-00000000000000bb"
    )

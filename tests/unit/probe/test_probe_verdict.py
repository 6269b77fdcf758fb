"""Judging the probe's reports, and ``airlock probe``'s refusals of bad arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.probe._verdict import canary_rows, http_row, tcp_rows
from airlock.probe.client import report_of


def test_the_report_is_found_in_the_bash_tools_answer() -> None:
    answer = 'exit code 0\nstdout:\nsome noise\n{"tcp": {"a": "refused"}}\nstderr:\n'
    assert report_of(answer) == {"tcp": {"a": "refused"}}
    envelope = json.dumps({"exit_code": 0, "stdout": 'noise\n{"tcp": {"b": "timeout"}}\n', "stderr": ""})
    assert report_of(envelope) == {"tcp": {"b": "timeout"}}
    failed = json.dumps({"exit_code": 1, "stdout": "", "stderr": "Traceback ..."})
    with pytest.raises(ValueError, match="the probe program failed"):
        report_of(failed)


def test_each_kind_of_hole_fails_its_row() -> None:
    report = {
        "tcp": {"controller": "reachable", "api": "timeout", "node": "refused"},
        "http": {"allowed": {"status": 200}, "forbidden": {"status": 200}},
        "canary_found_in": ["environment"],
    }
    rows = tcp_rows("deny", report, {"controller": "1:1", "api": "2:2", "node": "3:3", "missing": "4:4"})
    assert [r.passed for r in rows] == [False, True, True, False]  # "not tried" is no pass
    assert http_row("deny", report, "allowed", "u", allowed=False).passed is False
    assert http_row("allow", report, "allowed", "u", allowed=True).passed is True
    assert http_row("allow", report, "forbidden", "u", allowed=False).passed is False
    (canary,) = canary_rows("allow", report)
    assert canary.passed is False and canary.observed == "environment"
    (unscanned,) = canary_rows("allow", {})
    assert unscanned.passed is False


def test_bad_arguments_exit_2_naming_the_problem(tmp_path: Path) -> None:
    token, canary = tmp_path / "token", tmp_path / "canary"
    token.write_text("t0ken\n")
    canary.write_text("")
    base = ["probe", "--controller", "127.0.0.1:9", "--token-file", str(token), "--allowed-url", "http://x:8080/",
            "--self-ip", "127.0.0.1"]  # fmt: skip
    runner = CliRunner()
    empty = runner.invoke(app, [*base, "--canary-file", str(canary)])
    assert empty.exit_code == 2 and "is empty" in empty.output
    canary.write_text("c4nary-value-long-enough\n")
    bad = runner.invoke(app, [*base, "--canary-file", str(canary), "--target", "nohostport"])
    assert bad.exit_code == 2 and "is not NAME=HOST:PORT" in bad.output
    gone = runner.invoke(app, [*base, "--canary-file", str(tmp_path / "missing")])
    assert gone.exit_code == 2 and "cannot read the canary file" in gone.output
    assert "c4nary-value-long-enough" not in bad.output + empty.output + gone.output

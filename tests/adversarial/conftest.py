"""The adversarial suite: hooks that file each case under its ``attack`` category and print
the suite's table at the end (and save it where ``AIRLOCK_ADVERSARIAL_REPORT`` says), and
the module-scoped ``boundary`` every escape runs behind (runc, then gVisor)."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.support.adversarial import OUTCOMES, REPORT_ENV, Outcome, render, save
from tests.support.containers import require_isolation


def pytest_configure(config: pytest.Config) -> None:
    config.stash[OUTCOMES] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("attack")
    if marker is None or not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    case = item.name.removeprefix("test_")
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        found = Outcome(marker.args[0], case, "skipped", str(reason).removeprefix("Skipped: "))
    else:
        found = Outcome(marker.args[0], case, "held" if report.passed else "failed")
    item.config.stash.setdefault(OUTCOMES, []).append(found)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    outcomes = config.stash.get(OUTCOMES, [])
    if not outcomes:
        return
    terminalreporter.write_line("")
    terminalreporter.write(render(outcomes))
    if path := os.environ.get(REPORT_ENV):
        save(outcomes, Path(path))


@pytest.fixture(scope="module", params=["container", "gvisor"])
def boundary(request: pytest.FixtureRequest) -> str:
    """The isolation this module's hostile sandboxes run behind."""
    kind = str(request.param)
    require_isolation(kind)
    return kind

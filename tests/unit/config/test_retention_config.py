"""``retention:`` in airlock.yaml (and a tenant's own): durations with days, or forever."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import Pruner
from airlock.identity import RetentionSettings, parse_retention

Write = Callable[..., Path]
One = Callable[[Path], str]
AGENTS = "agents: {}\n"


def test_by_default_jobs_are_kept_90_days_and_the_audit_log_forever(write: Write) -> None:
    retention = load_config(write(AGENTS)).retention
    assert retention == RetentionSettings(finished_jobs=timedelta(days=90), audit=None)
    assert retention.model_dump(mode="json") == {"finished_jobs": "90d", "audit": "forever"}


def test_a_retention_section_and_a_tenants_own(write: Write) -> None:
    config = load_config(
        write(
            AGENTS
            + "retention: {finished_jobs: 30d, audit: 400d}\n"
            + "auth:\n  tenants:\n    acme: {retention: {finished_jobs: 1d12h}}\n"
            + "    keep: {retention: {finished_jobs: forever}}\n    plain: {}\n"
        )
    )
    assert config.retention == RetentionSettings(finished_jobs=timedelta(days=30), audit=timedelta(days=400))
    now = datetime(2026, 6, 1, tzinfo=UTC)
    pruner = Pruner(None, None, config.retention, config.auth, now=lambda: now)  # type: ignore[arg-type]
    cutoffs = pruner.cutoffs()
    assert cutoffs.default == now - timedelta(days=30) and cutoffs.audit == now - timedelta(days=400)
    assert cutoffs.tenants == {"acme": now - timedelta(days=1, hours=12), "keep": None}
    assert pruner.cutoffs("acme").only == "acme" and pruner.cutoffs("acme").audit is None


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "retention: {finished_jobs: 30x}\n",
            "2:13: retention.finished_jobs: invalid retention '30x'; use e.g. \"90d\"",
        ),
        (
            "retention: {finished_jobs: 0d}\n",
            "2:13: retention.finished_jobs: a retention must be positive",
        ),
        (
            "retention: {jobs: 1d}\n",
            "2:13: retention.jobs: unknown key 'jobs'; valid keys: audit, finished_jobs",
        ),
        (
            "auth:\n  tenants:\n    t: {retention: {}}\n",
            "4:9: auth.tenants.t.retention.finished_jobs: Field required",
        ),
    ],
)
def test_a_bad_retention_is_located(write: Write, one_issue: One, section: str, expected: str) -> None:
    path = write(AGENTS + section)
    assert one_issue(path).startswith(f"{path}:{expected}")


def test_retention_set_in_two_files_is_an_error(write: Write, one_issue: One) -> None:
    write("retention: {finished_jobs: 1d}\n", "airlock.d/a.yaml")
    second = write(AGENTS + "retention: {finished_jobs: 2d}\n", "airlock.d/b.yaml")
    assert "retention is set twice: " in one_issue(second.parent)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("90d", timedelta(days=90)),
        ("1d12h", timedelta(hours=36)),
        ("30m", timedelta(minutes=30)),
        ("forever", None),
    ],
)
def test_retention_values(text: str, kept: timedelta | None) -> None:
    assert parse_retention(text) == kept


@pytest.mark.parametrize("text", ["", "12", "1h1d", "1d1d", "d", "-1d", "40000d", "1w"])
def test_bad_retention_values(text: str) -> None:
    with pytest.raises(ValueError, match="retention"):
        parse_retention(text)

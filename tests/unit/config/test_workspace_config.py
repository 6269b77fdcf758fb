"""An agent's ``durability.workspace``: snapshots on with a 256 MiB cap by default, a cap as
bytes or a quantity, and each mistake naming its key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.behaviour import WorkspacePolicy
from airlock.config import load_config

Write = Callable[..., Path]
One = Callable[[Path], str]

AGENT = """\
agents:
  ops:
    provider: {kind: scripted, script: []}
    tools: [bash]
"""


def test_snapshots_are_on_with_a_256_mib_cap_by_default(write: Write) -> None:
    policy = load_config(write(AGENT)).agent("ops").durability.workspace
    assert policy == WorkspacePolicy(snapshots=True, max_bytes=256 * 2**20)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("{snapshots: false}", WorkspacePolicy(snapshots=False)),
        ("{max_bytes: 1Gi}", WorkspacePolicy(max_bytes=2**30)),
        ("{max_bytes: 1048576}", WorkspacePolicy(max_bytes=2**20)),
    ],
)
def test_the_section_is_read(write: Write, section: str, expected: WorkspacePolicy) -> None:
    text = AGENT + f"    durability: {{in_flight: rerun, workspace: {section}}}\n"
    durability = load_config(write(text)).agent("ops").durability
    assert durability.workspace == expected and durability.in_flight == "rerun"


@pytest.mark.parametrize(
    ("section", "where", "what"),
    [
        ("{max_bytes: lots}", "agents.ops.durability.workspace.max_bytes", "not a byte quantity"),
        ("{max_bytes: 0}", "agents.ops.durability.workspace.max_bytes", "greater than 0"),
        ("{snapshot: true}", "agents.ops.durability.workspace.snapshot", "unknown key"),
    ],
)
def test_each_mistake_names_its_key(
    write: Write, one_issue: One, section: str, where: str, what: str
) -> None:
    message = one_issue(write(AGENT + f"    durability: {{workspace: {section}}}\n"))
    assert f" {where}: " in message and what in message, message

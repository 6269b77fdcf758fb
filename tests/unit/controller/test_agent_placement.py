"""The controller's AgentRunner hands an agent's placement to its backend: with each job's
request and when it warms the agent's pool (so a warm sandbox is placed as its jobs are)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller._execute import AgentRunner
from airlock.policy import SandboxPlan
from airlock.sandbox import Placement, SandboxRequest
from layer0 import EnvironmentSpec, TurnInput, TurnOutput

Write = Callable[..., Path]

CONFIG = """\
pool: {size: 1}
agents:
  trainer:
    provider: {kind: scripted, script: []}
    backend: kubernetes
    placement:
      node_selector: {airlock.dev/pool: gpu}
      runtime_class: nvidia
"""


class Recorder:
    """A backend that records what it is asked and runs nothing."""

    def __init__(self) -> None:
        self.requests: list[SandboxRequest] = []
        self.warmed: list[Placement | None] = []

    async def run(self, request: SandboxRequest) -> TurnOutput:
        self.requests.append(request)
        raise RuntimeError("recorded")

    async def host_address(self) -> str:
        return "127.0.0.1"

    async def warm(
        self, environment: EnvironmentSpec, plan: SandboxPlan, placement: Placement | None = None
    ) -> bool:
        self.warmed.append(placement)
        return True


async def test_the_runner_hands_the_agents_placement_to_its_backend(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    config = load_config(path)
    runner = AgentRunner(config)
    recorder: Any = Recorder()
    runner._sandboxes["trainer"] = recorder
    expected = Placement(node_selector={"airlock.dev/pool": "gpu"}, runtime_class="nvidia")
    assert await runner.warm() == []
    assert recorder.warmed == [expected]
    with pytest.raises(RuntimeError, match="recorded"):
        await runner.run(config.agent("trainer"), TurnInput.new("go"))
    (request,) = recorder.requests
    assert request.placement == expected
    await runner.aclose()

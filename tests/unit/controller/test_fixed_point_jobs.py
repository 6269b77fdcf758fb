"""Fixed-point jobs (``until_stable``): stable, limit cycle and max iterations, each with its
exit reason; one of them through a real runner process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airlock.config import AgentConfig, load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import FixedPointRun, JobState
from airlock.state import SqliteStore
from airlock.testing import text_step
from airlock.weave import state_hash
from layer0 import Content, ExitReason, TurnInput, TurnMetadata, TurnOutput

pytestmark = pytest.mark.timeout(60)

CONFIG = {
    "version": 1,
    "agents": {
        "f": {"provider": {"kind": "scripted", "script": []}, "backend": "process"},
        "real": {
            "provider": {"kind": "scripted", "script": [text_step("settled")]},
            "backend": "process",
        },
    },
}


class FunctionRunner(AgentRunner):
    """Runs no sandbox: the agent is a function of its input's text (one model call each)."""

    function: Callable[[str], str] = staticmethod(lambda text: text)
    calls: list[str]

    async def run(self, agent: AgentConfig, input: TurnInput, **_: Any) -> TurnOutput:
        self.calls.append(input.message.joined_text())
        metadata = TurnMetadata.empty().model_copy(update={"turns_used": 1, "cost": Decimal("0.01")})
        return TurnOutput(
            message=Content.text(self.function(input.message.joined_text())),
            exit_reason=ExitReason.complete(),
            metadata=metadata,
        )


@contextlib.asynccontextmanager
async def service_with(tmp_path: Path, function: Callable[[str], str] | None) -> AsyncIterator[JobService]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    config = load_config(path)
    runner: AgentRunner
    if function is None:
        runner = AgentRunner(config)
    else:
        runner = FunctionRunner(config)
        runner.function = staticmethod(function)  # type: ignore[attr-defined]
        runner.calls = []  # type: ignore[attr-defined]
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, runner, state) as service,
    ):
        yield service


def walk(mapping: dict[str, str]) -> Callable[[str], str]:
    return lambda text: mapping[text]


@pytest.mark.parametrize(
    ("function", "start", "exit", "iterations", "chosen", "answer"),
    [
        # f(x) = x at once: stable in one iteration
        (walk({"x": "x"}), "x", "stable", 1, 0, "x"),
        # x -> a -> a: stable in the second
        (walk({"x": "a", "a": "a"}), "x", "stable", 2, 1, "a"),
        # x -> a -> b -> a: a repeats within the window: a limit cycle, collapsed to its first state
        (walk({"x": "a", "a": "b", "b": "a"}), "x", "cycle", 3, 0, "a"),
        # 1 -> 2 -> 3 -> 4 -> ...: never settles within 3 iterations
        (lambda t: str(int(t) + 1), "1", "max_iterations", 3, 2, "4"),
    ],
)
async def test_each_exit_with_its_reason(
    tmp_path: Path,
    function: Callable[[str], str],
    start: str,
    exit: str,
    iterations: int,
    chosen: int,
    answer: str,
) -> None:
    async with service_with(tmp_path, function) as service:
        run = FixedPointRun(max_iterations=3, window=3)
        job = await service.submit("f", TurnInput.new(start), until_stable=run)
        done = await service.wait(job.id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert done.output is not None and done.fixed_point is not None
    assert done.output.exit_reason == ExitReason.custom(f"fixed_point_{exit}")
    assert done.fixed_point.exit == exit
    assert len(done.fixed_point.hashes) == iterations
    assert done.fixed_point.chosen == chosen
    assert done.output.message.joined_text() == answer
    assert done.output.metadata.turns_used == iterations  # summed over every iteration
    assert done.output.metadata.cost == Decimal("0.01") * iterations
    pre, post = done.fixed_point.hashes[-1]
    assert (pre == post) is (exit == "stable")


async def test_each_iteration_gets_the_previous_output_and_is_recorded(tmp_path: Path) -> None:
    async with service_with(tmp_path, walk({"x": "a", "a": "b", "b": "b"})) as service:
        job = await service.submit("f", TurnInput.new("x"), until_stable=FixedPointRun())
        done = await service.wait(job.id)
        runner = service.runner
        assert runner.calls == ["x", "a", "b"]  # type: ignore[attr-defined]
        _, records = await service.weave(job.id)
    iterations = [r for r in records if r.kind == "iteration"]
    assert [r.content["iteration"] for r in iterations] == [1, 2, 3]  # type: ignore[index, call-overload]
    assert iterations[-1].state_hash_pre == iterations[-1].state_hash_post
    assert iterations[0].state_hash_pre == state_hash(Content.text("x").model_dump(mode="json"))
    assert done.output is not None and done.output.message.joined_text() == "b"


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        FixedPointRun(window=1)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        FixedPointRun(max_iterations=0)


async def test_a_real_runner_reaches_its_fixed_point(tmp_path: Path) -> None:
    """A scripted agent that always answers "settled": the second iteration is stable."""
    async with service_with(tmp_path, None) as service:
        job = await service.submit("real", TurnInput.new("begin"), until_stable=FixedPointRun())
        done = await service.wait(job.id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert done.fixed_point is not None and done.fixed_point.exit == "stable"
    assert len(done.fixed_point.hashes) == 2
    assert done.output is not None and done.output.message.joined_text() == "settled"

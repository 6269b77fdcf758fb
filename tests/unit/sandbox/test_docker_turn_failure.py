"""How the Docker sandbox names a turn that failed: when the runner's channel broke, it waits
for the container to show how it ended (a gVisor kernel takes seconds to go down) before
deciding; an OOM kill is ``resource_exceeded`` (memory), a gVisor kernel that died of its host
task cap is ``resource_exceeded`` (processes), any other death is ``other``, and a channel
that broke while the sandbox lives on stays the retryable turn error it was."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from airlock.sandbox._lifecycle import execute
from airlock.sandbox._limits import Limits
from airlock.sandbox.docker import _instance
from airlock.sandbox.docker._config import GVISOR_KERNEL_DIED, Boundary
from layer0 import EnvError, TurnError, TurnInput

LIMITS = Limits(nano_cpus=10**9, memory_bytes=256 * 2**20, disk_bytes=0, tmp_bytes=0, pids=256, gpus=None)
GVISOR = Boundary("gvisor", "runsc", init=False)
RUNC = Boundary("container", "runc")


class DyingEngine:
    """A docker client whose container is still running when asked first, and has ended with
    ``exit_code`` (and ``oom``) once ``wait`` returns."""

    def __init__(self, exit_code: int | None, oom: bool = False) -> None:
        self.exit_code, self.oom = exit_code, oom
        self.ended = threading.Event()
        self.waited = 0
        self.api = SimpleNamespace(inspect_container=self._inspect, wait=self._wait)

    def _inspect(self, container_id: str) -> dict[str, Any]:
        if self.exit_code is None or not self.ended.is_set():
            return {"State": {"Status": "running", "Running": True, "OOMKilled": False}}
        return {
            "State": {"Status": "exited", "Running": False, "OOMKilled": self.oom, "ExitCode": self.exit_code}
        }

    def _wait(self, container_id: str, timeout: float) -> dict[str, Any]:
        self.waited += 1
        if self.exit_code is None:  # lives on: docker-py's wait times out
            import requests

            raise requests.exceptions.ReadTimeout("timed out")
        self.ended.set()
        return {"StatusCode": self.exit_code}

    def events(self, **_: Any) -> Any:
        return _Stream()

    def logs(self, **_: Any) -> bytes:
        return b""


class _Stream(list[Any]):
    def close(self) -> None:
        pass


class BrokenRemote:
    """A RemoteTurn whose turn fails with ``error``."""

    def __init__(self, error: TurnError) -> None:
        self.error = error

    async def execute(self, input: TurnInput, events: Any = None) -> Any:
        raise self.error

    async def close(self) -> None:
        pass


def channel_broke() -> TurnError:
    cause = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "Socket closed"
    )
    try:
        raise TurnError.retryable("runner at unix:/x: UNAVAILABLE: Socket closed") from cause
    except TurnError as e:
        return e


def fail(engine: DyingEngine, boundary: Boundary, error: TurnError, tmp_path: Path) -> EnvError:
    sandbox = _instance.DockerInstance(engine, tmp_path)
    sandbox.container = SimpleNamespace(id="c0ffee", logs=engine.logs)
    sandbox.boundary = boundary
    sandbox.limits = LIMITS
    sandbox.remote = BrokenRemote(error)  # type: ignore[assignment]
    with pytest.raises(EnvError) as caught:
        asyncio.run(execute(sandbox, TurnInput.new("go"), None, None))
    return caught.value


def test_a_gvisor_kernel_that_died_of_its_task_cap_is_a_resource(tmp_path: Path) -> None:
    engine = DyingEngine(exit_code=GVISOR_KERNEL_DIED)
    error = fail(engine, GVISOR, channel_broke(), tmp_path)
    assert engine.waited == 1  # it was still running when the channel broke
    assert error.kind == "resource_exceeded"
    assert "exceeded: processes: " in str(error) and "8256 host tasks" in str(error)


def test_an_oom_kill_seen_after_the_wait_is_memory(tmp_path: Path) -> None:
    error = fail(DyingEngine(exit_code=137, oom=True), GVISOR, channel_broke(), tmp_path)
    assert error.kind == "resource_exceeded" and "exceeded: memory: " in str(error) and "256Mi" in str(error)


def test_the_same_exit_under_runc_is_a_death_not_a_resource(tmp_path: Path) -> None:
    error = fail(DyingEngine(exit_code=2), RUNC, channel_broke(), tmp_path)
    assert error.kind == "other" and "died during the turn (exit code 2)" in str(error)


def test_a_channel_that_broke_while_the_sandbox_lives_stays_retryable(tmp_path: Path) -> None:
    engine = DyingEngine(exit_code=None)
    error = fail(engine, GVISOR, channel_broke(), tmp_path)
    assert engine.waited == 1 and error.kind == "turn_error" and "retryable" in str(error)


def test_a_failure_inside_the_turn_does_not_wait(tmp_path: Path) -> None:
    engine = DyingEngine(exit_code=None)
    error = fail(engine, GVISOR, TurnError.retryable("the model is rate limited"), tmp_path)
    assert engine.waited == 0 and error.kind == "turn_error"

"""Helpers for the runner's control tests: Execute calls read in the background over raw gRPC."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from layer0 import TurnInput

from .runner_helpers import scripted_spec, text_step, tool_step

#: Bound on waits that would otherwise hang when the runner misbehaves (not a timing check).
HANG_GUARD_S = 20.0


def gated_step(gate: str, use_id: str) -> dict[str, Any]:
    """A model step whose ``bash`` call runs until the file ``gate`` exists in the workspace."""
    return tool_step("bash", {"command": f"while [ ! -e {gate} ]; do sleep 0.02; done"}, use_id=use_id)


def request(
    steps: list[dict[str, Any]], execution_id: str, *, start_paused: bool = False
) -> pb.ExecuteRequest:
    """An Execute of a scripted agent with the ``bash`` tool playing ``steps``."""
    spec = scripted_spec([*steps, text_step("done")], ["bash"])
    return pb.ExecuteRequest(
        agent=wire.spec_to_proto(spec),
        input=wire.input_to_proto(TurnInput.new("go")),
        execution_id=execution_id,
        start_paused=start_paused,
    )


def open_gate(workspace: Path, gate: str) -> None:
    (workspace / gate).touch()


class Runner:
    """A raw stub on a runner, with its token."""

    def __init__(self, address: str, token: str) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = pb_grpc.RunnerStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),)

    def execute(self, message: pb.ExecuteRequest) -> Stream:
        return Stream(self.stub.Execute(message, metadata=self.metadata))

    async def pause(self, execution_id: str) -> None:
        await self.stub.Pause(pb.PauseRequest(execution_id=execution_id), metadata=self.metadata)

    async def resume(self, execution_id: str) -> None:
        await self.stub.Resume(pb.ResumeRequest(execution_id=execution_id), metadata=self.metadata)

    async def step(self, execution_id: str) -> pb.StepResponse:
        response: pb.StepResponse = await self.stub.Step(
            pb.StepRequest(execution_id=execution_id), metadata=self.metadata
        )
        return response

    async def close(self) -> None:
        await self.channel.close()


class Stream:
    """One Execute call, read in the background: the kinds of its events, and how it ended."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.kinds: list[str] = []
        self.error: grpc.aio.AioRpcError | None = None
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for event in self.call:
                self.kinds.append(event.WhichOneof("kind"))
        except grpc.aio.AioRpcError as e:
            self.error = e

    async def until(self, kind: str, count: int = 1) -> None:
        """Wait until ``count`` events of ``kind`` arrived (fails if the stream ends first)."""
        async with asyncio.timeout(HANG_GUARD_S):
            while self.kinds.count(kind) < count and not self.task.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert self.kinds.count(kind) >= count, (self.kinds, self.error)

    async def running_or_ended(self) -> None:
        """Wait until the turn's first tool runs or the call ends."""
        async with asyncio.timeout(HANG_GUARD_S):
            while "tool_started" not in self.kinds and not self.task.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)

    async def end(self) -> list[str]:
        """The kinds of every event, once the call has ended."""
        await asyncio.wait_for(self.task, HANG_GUARD_S)
        return self.kinds

    def reason(self) -> str | None:
        """The ``airlock-reason`` of a refused call."""
        assert self.error is not None
        return next((str(v) for k, v in self.error.trailing_metadata() or () if k == "airlock-reason"), None)

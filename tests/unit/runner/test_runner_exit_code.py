"""A command that exits non-zero ran: its ``tool_finished`` event says ``success`` (the tool
ran) with the command's ``exit_code``; an error result is ``success`` false without one."""

from __future__ import annotations

import grpc

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from layer0 import TurnInput

from .runner_helpers import scripted_spec, text_step, tool_step


async def test_a_non_zero_exit_is_reported_with_its_code(address: str, token: str) -> None:
    spec = scripted_spec(
        [
            tool_step("bash", {"command": "echo failing; exit 3"}, use_id="a"),
            tool_step("bash", {"command": "true"}, use_id="b"),
            tool_step("bash", {"bogus": 1}, use_id="c"),  # invalid input: an error result
            text_step("done"),
        ],
        ["bash"],
    )
    request = pb.ExecuteRequest(
        agent=wire.spec_to_proto(spec), input=wire.input_to_proto(TurnInput.new("go")), execution_id="x"
    )
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.RunnerStub(channel)
        events = [e async for e in stub.Execute(request, metadata=(("authorization", f"Bearer {token}"),))]
    finished = {e.tool_finished.tool_use_id: e.tool_finished for e in events if e.HasField("tool_finished")}
    assert (finished["a"].success, finished["a"].exit_code) == (True, 3)
    assert '"exit_code": 3' in finished["a"].output or '"exit_code":3' in finished["a"].output
    assert (finished["b"].success, finished["b"].exit_code) == (True, 0)
    assert not finished["c"].success and not finished["c"].HasField("exit_code")
    [output] = [e.output for e in events if e.HasField("output")]
    assert [r.success for r in output.metadata.tools_called] == [True, True, False]
    # The Python client reads the exit code back.
    [event] = [wire.event_from_proto(e) for e in events if e.tool_finished.tool_use_id == "a"]
    assert getattr(event, "exit_code", None) == 3

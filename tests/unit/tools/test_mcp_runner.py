"""MCP servers through a real runner (gRPC on loopback): the runner starts the agent's servers
when it builds the turn, offers their tools as ``<server>.<tool>``, and stops them when the
turn ends; a server that does not start is INVALID_ARGUMENT before any model call."""

from __future__ import annotations

import json
from typing import Any

from airlock.runner import RemoteTurn
from airlock.testing import scripted_agent, text_step, tool_step
from airlock.turn import ToolFinished
from layer0 import ExitReason, TurnInput
from tests.support.mcp_servers import process_gone, stdio_command
from tests.support.refusals import refused_before_any_model_call


def mcp_server(mode: str = "stdio", *args: str) -> dict[str, Any]:
    return {
        "name": "srv",
        "transport": "stdio",
        "command": stdio_command(mode, *args),
        "allowed_tools": ["echo", "where"],
    }


async def test_the_runner_offers_calls_and_then_stops_an_mcp_server(runner: tuple[str, str]) -> None:
    address, token = runner
    spec = scripted_agent(
        [
            tool_step("srv.where", {}, id="t1", match={"tools": ["calculator", "srv.echo", "srv.where"]}),
            tool_step("srv.echo", {"text": "hello from the model"}, id="t2"),
            text_step("done"),
        ],
        name="mcp-user",
        tools=["calculator"],
        mcp_servers=[mcp_server()],
    )
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        output = await turn.execute(TurnInput.new("use the server"), events=sink)
    assert output.exit_reason == ExitReason.complete(), output
    where, echo = [e for e in events if isinstance(e, ToolFinished)]
    assert where.success and echo.success
    assert json.loads(echo.output) == {"result": "hello from the model"}
    assert await process_gone(int(json.loads(where.output)["pid"]))  # stopped when the turn ended


async def test_a_server_that_does_not_start_is_refused_before_any_model_call(runner: tuple[str, str]) -> None:
    spec = scripted_agent(
        [text_step("never played")], name="mcp-user", mcp_servers=[mcp_server("exit-at-start", "4")]
    )
    message = await refused_before_any_model_call(runner, spec)
    assert "agent: MCP server 'srv' (stdio: " in message
    assert "did not start: the server exited (code 4): fatal: cannot open the database (on purpose)" in (
        message
    )


async def test_the_servers_are_stopped_before_the_result_so_the_next_execute_is_served(
    runner: tuple[str, str],
) -> None:
    """A runner serves one execution at a time: the turn's MCP servers are stopped before its
    result is sent, so a client sending its next Execute the moment the result arrives is never
    refused as busy (stopping a server takes a moment: after the result, that window was open)."""
    address, token = runner
    spec = scripted_agent([text_step("done")], name="mcp-user", mcp_servers=[mcp_server()])
    async with RemoteTurn(address, token, spec) as turn:
        for _ in range(3):
            output = await turn.execute(TurnInput.new("again"))
            assert output.exit_reason == ExitReason.complete(), output

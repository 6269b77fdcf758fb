"""ToolRegistry, middleware, schema validation, the @tool decorator, ModelRetry and parallel calls."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from pydantic import BaseModel, JsonValue

from airlock.errors import SpecError, ToolError
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    FunctionTool,
    NeuronTurn,
    ToolContext,
    ToolDyn,
    ToolNext,
    ToolOutcome,
    ToolRegistry,
    ToolResultPart,
    tool,
)
from layer0 import ExitReason, TurnInput

from .turn_helpers import Recorder, add, echo, result_parts

CTX = ToolContext(tool_use_id="t1")


# -- @tool ------------------------------------------------------------------------------


def test_schema_and_description_come_from_signature_and_docstring() -> None:
    assert isinstance(add, ToolDyn)
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "the first"},
            "b": {"type": "integer", "description": "the second"},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


class Point(BaseModel):
    x: float
    y: float


def test_defaults_nested_models_and_context_parameter() -> None:
    @tool(name="place", description="Place a point.")
    async def place(point: Point, label: str = "p", *, ctx: ToolContext) -> dict[str, Any]:
        return {"label": label, "x": point.x, "id": ctx.tool_use_id}

    schema = place.input_schema
    assert place.name == "place" and place.description == "Place a point."
    assert schema["required"] == ["point"]
    assert schema["properties"]["label"]["default"] == "p"
    assert "ctx" not in schema["properties"]
    assert "$defs" in schema


async def test_async_tool_call_validates_and_returns_json() -> None:
    @tool
    async def place(point: Point, label: str = "p", *, ctx: ToolContext) -> dict[str, Any]:
        """Place."""
        return {"label": label, "x": point.x, "id": ctx.tool_use_id}

    assert await place.call({"point": {"x": 1, "y": 2}}, CTX) == {"label": "p", "x": 1.0, "id": "t1"}
    with pytest.raises(ToolError) as info:
        await place.call({"point": {"x": "nope"}}, CTX)
    assert info.value.kind == "invalid_input"


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    seen: list[str] = []

    @tool
    def where() -> str:
        """Where am I."""
        seen.append(threading.current_thread().name)
        return "here"

    assert await where.call({}, CTX) == "here"
    assert seen and seen[0] != threading.main_thread().name


def test_var_args_cannot_be_a_tool() -> None:
    def bad(*args: int) -> int:
        return 0

    with pytest.raises(SpecError):
        FunctionTool(bad)


def test_decorated_function_is_still_callable() -> None:
    assert echo("x") == "x"


# -- registry -----------------------------------------------------------------------------


async def test_invalid_input_is_an_error_result_not_a_crash() -> None:
    reg = ToolRegistry([add])
    out = await reg.execute("add", {"a": "one"}, CTX)
    assert out.is_error
    assert out.content.startswith("invalid_input: invalid input for tool 'add': ")
    assert "'b' is a required property" in out.content and "'one' is not of type 'integer'" in out.content


async def test_unknown_tool_lists_available() -> None:
    reg = ToolRegistry([add, echo])
    assert await reg.execute("nope", {}, CTX) == ToolOutcome(
        "unknown tool 'nope'; available tools: add, echo", is_error=True
    )
    assert (await reg.execute("add", {"a": 1, "b": 1}, CTX, allowed=["echo"])).is_error


class Failing:
    """A hand-written ToolDyn raising what it is told to."""

    name = "failing"
    description = "fails"
    input_schema: dict[str, Any] = {"type": "object"}

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue:
        raise self.error


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (ToolError.model_retry("date must be YYYY-MM-DD"), "date must be YYYY-MM-DD"),
        (ToolError.permission_denied("outside workspace"), "permission_denied: outside workspace"),
        (ToolError.execution_failed("exit 2"), "execution_failed: exit 2"),
        (ToolError.not_found("gone"), "not_found: gone"),
        (ToolError.cancelled(), "cancelled: cancelled"),
    ],
)
async def test_tool_error_kinds_become_error_results(error: ToolError, text: str) -> None:
    out = await ToolRegistry([Failing(error)]).execute("failing", {}, CTX)
    assert out == ToolOutcome(text, is_error=True)


async def test_unexpected_exceptions_are_logged_error_results(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="airlock.turn._registry"):
        out = await ToolRegistry([Failing(KeyError("k"))]).execute("failing", {}, CTX)
    assert out.is_error and "KeyError" in out.content
    assert any("failing" in r.getMessage() for r in caplog.records)


async def test_non_string_results_are_json() -> None:
    @tool
    async def data() -> dict[str, Any]:
        """Data."""
        return {"n": 1, "s": "é"}

    assert await ToolRegistry([data]).execute("data", {}, CTX) == ToolOutcome('{"n": 1, "s": "é"}')


def test_duplicate_and_invalid_schema_are_refused() -> None:
    with pytest.raises(SpecError, match="registered twice"):
        ToolRegistry([add, add])
    bad = Failing(RuntimeError())
    bad.input_schema = {"type": 12}
    with pytest.raises(SpecError, match="invalid input schema"):
        ToolRegistry([bad])


async def test_middleware_chain_runs_in_registration_order_and_can_rewrite() -> None:
    trace: list[str] = []

    async def outer(name: str, input: JsonValue, ctx: ToolContext, nxt: ToolNext) -> JsonValue:
        trace.append("outer>")
        result = await nxt(name, input, ctx)
        trace.append("<outer")
        return result

    async def doubler(name: str, input: JsonValue, ctx: ToolContext, nxt: ToolNext) -> JsonValue:
        trace.append("doubler>")
        assert isinstance(input, dict)
        result = await nxt(name, {"a": input["a"] * 2, "b": input["b"]}, ctx)
        trace.append("<doubler")
        return result

    reg = ToolRegistry([add], middleware=[outer, doubler])
    assert await reg.execute("add", {"a": 2, "b": 1}, CTX) == ToolOutcome("5")
    assert trace == ["outer>", "doubler>", "<doubler", "<outer"]


async def test_middleware_can_short_circuit_and_input_is_validated_after_it() -> None:
    async def deny(name: str, input: JsonValue, ctx: ToolContext, nxt: ToolNext) -> JsonValue:
        if name == "echo":
            raise ToolError.permission_denied("echo is off today")
        return await nxt(name, input, ctx)

    async def breaker(name: str, input: JsonValue, ctx: ToolContext, nxt: ToolNext) -> JsonValue:
        return await nxt(name, {"a": "broken"}, ctx)

    reg = ToolRegistry([add, echo])
    reg.use(deny)
    assert await reg.execute("echo", {"text": "x"}, CTX) == ToolOutcome(
        "permission_denied: echo is off today", is_error=True
    )
    reg.use(breaker)
    assert (await reg.execute("add", {"a": 1, "b": 2}, CTX)).is_error


# -- in the loop --------------------------------------------------------------------------


async def test_model_retry_round_trip() -> None:
    @tool
    async def book(date: str) -> str:
        """Book a date."""
        if len(date) != 10:
            raise ToolError.model_retry("date must be in YYYY-MM-DD format")
        return f"booked {date}"

    provider = FakeProvider(
        [
            tool_response(("t1", "book", {"date": "tomorrow"})),
            tool_response(("t2", "book", {"date": "2026-11-23"})),
            text_response("Booked."),
        ]
    )
    out = await NeuronTurn(provider, tools=[book]).execute(TurnInput.new("book tomorrow"))
    assert out.exit_reason == ExitReason.complete()
    first, second = result_parts(provider.requests[2].messages)
    assert first == ToolResultPart(
        tool_use_id="t1", content="date must be in YYYY-MM-DD format", is_error=True
    )
    assert second == ToolResultPart(tool_use_id="t2", content="booked 2026-11-23", is_error=False)
    assert [r.success for r in out.metadata.tools_called] == [False, True]


async def test_parallel_calls_run_concurrently_and_backfill_in_request_order() -> None:
    first_running = asyncio.Event()
    second_done = asyncio.Event()
    finished: list[str] = []

    @tool
    async def first() -> str:
        """Waits until `second` has finished: impossible unless both run at once."""
        first_running.set()
        await second_done.wait()
        finished.append("first")
        return "first result"

    @tool
    async def second() -> str:
        """Waits until `first` is running."""
        await first_running.wait()
        finished.append("second")
        second_done.set()
        return "second result"

    rec = Recorder()
    provider = FakeProvider([tool_response(("a", "first", {}), ("b", "second", {})), text_response("both")])
    turn = NeuronTurn(provider, tools=[first, second], events=rec)
    # The timeout is only a safety net: run sequentially, this would deadlock.
    out = await asyncio.wait_for(turn.execute(TurnInput.new("go")), 10)
    assert finished == ["second", "first"]
    assert result_parts(provider.requests[1].messages) == [
        ToolResultPart(tool_use_id="a", content="first result"),
        ToolResultPart(tool_use_id="b", content="second result"),
    ]
    assert [r.name for r in out.metadata.tools_called] == ["first", "second"]
    done = [e.tool_use_id for e in rec.events if e.type == "tool_finished"]  # type: ignore[union-attr]
    assert done == ["b", "a"]


async def test_tool_context_carries_agent_and_metadata() -> None:
    seen: list[ToolContext] = []

    @tool
    async def peek(ctx: ToolContext) -> str:
        """Peek."""
        seen.append(ctx)
        return "ok"

    provider = FakeProvider([tool_response(("t9", "peek", {})), text_response("done")])
    await NeuronTurn(provider, tools=[peek], name="alice").execute(
        TurnInput.new("x", metadata={"trace_id": "tr-1"})
    )
    assert seen == [ToolContext(tool_use_id="t9", agent="alice", metadata={"trace_id": "tr-1"})]

"""ToolChoicePolicy: which model calls must call a tool, and what counts as a failed step."""

from __future__ import annotations

import json

import pytest

from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    ContentPart,
    NeuronTurn,
    ProviderMessage,
    Role,
    TextPart,
    ToolChoicePolicy,
    ToolResultPart,
    failed_step,
    tool,
)
from layer0 import ExitReason, TurnInput


def results(*contents: str, is_error: bool = False) -> ProviderMessage:
    parts: list[ContentPart] = [
        ToolResultPart(tool_use_id=f"t{i}", content=c, is_error=is_error) for i, c in enumerate(contents)
    ]
    return ProviderMessage(role=Role.USER, content=parts)


def exit_code(code: object) -> str:
    return json.dumps({"exit_code": code, "stdout": "", "stderr": ""})


@pytest.mark.parametrize(
    ("message", "failed"),
    [
        (results("no such file", is_error=True), True),
        (results(exit_code(2)), True),
        (results(exit_code(-9)), True),
        (results(exit_code(0)), False),
        (results(exit_code(True)), False),  # a bool is not an exit code
        (results(exit_code("2")), False),
        (results('{"exit_code": 1'), False),  # not JSON: not a command's result
        (results("[1, 2]"), False),
        (results("7", exit_code(0), exit_code(1)), True),  # one failed call fails the step
        (ProviderMessage(role=Role.USER, content=[TextPart(text='{"exit_code": 1}')]), False),
    ],
)
def test_failed_step(message: ProviderMessage, failed: bool) -> None:
    assert failed_step([message]) is failed


def test_no_messages_is_no_failure() -> None:
    assert failed_step([]) is False


def test_defaults_ask_nothing() -> None:
    assert ToolChoicePolicy().request_extra(1, []) == {}
    assert ToolChoicePolicy().request_extra(2, [results(exit_code(1))]) == {}


def test_first_call_only() -> None:
    policy = ToolChoicePolicy(first="required")
    assert policy.request_extra(1, []) == {"tool_choice": "required"}
    assert policy.request_extra(2, [results(exit_code(1))]) == {}


def test_parallel_is_sent_on_every_call_when_set() -> None:
    assert ToolChoicePolicy(parallel=False).request_extra(3, []) == {"parallel_tool_calls": False}
    assert ToolChoicePolicy(parallel=True).request_extra(1, []) == {"parallel_tool_calls": True}


def test_after_failure_requires_a_call_once() -> None:
    policy = ToolChoicePolicy(after_failure="required")
    call = ProviderMessage(role=Role.ASSISTANT, content=[TextPart(text="calling")])
    ok, failed = results(exit_code(0)), results(exit_code(2))
    assert policy.request_extra(2, [call, ok]) == {}
    assert policy.request_extra(2, [call, failed]) == {"tool_choice": "required"}
    # the forced call failed too: the model may answer now (a task may be to report a failure)
    assert policy.request_extra(3, [call, failed, call, failed]) == {}
    assert policy.request_extra(4, [call, ok, call, failed]) == {"tool_choice": "required"}


@tool
def sh(command: str) -> dict[str, object]:
    """Run a command (fails when it starts with 'false').

    Args:
        command: the command line
    """
    return {"exit_code": 1 if command.startswith("false") else 0, "stdout": "", "stderr": ""}


async def test_the_loop_asks_after_a_failed_command_once_and_sends_parallel() -> None:
    provider = FakeProvider(
        [
            tool_response(("t1", "sh", {"command": "false 1"})),
            tool_response(("t2", "sh", {"command": "false 2"})),
            tool_response(("t3", "sh", {"command": "true"})),
            tool_response(("t4", "sh", {"command": "false 3"})),
            text_response("exit code 1"),
        ]
    )
    policy = ToolChoicePolicy(first="required", after_failure="required", parallel=False)
    turn = NeuronTurn(provider, tools=[sh], tool_choice=policy)
    out = await turn.execute(TurnInput.new("run it"))
    assert out.exit_reason == ExitReason.complete()
    asked = [r.extra.get("tool_choice") for r in provider.requests]
    assert asked == ["required", "required", None, None, "required"]
    assert all(r.extra["parallel_tool_calls"] is False for r in provider.requests)

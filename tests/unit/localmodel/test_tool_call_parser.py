# ruff: noqa: E501  (tables of model outputs read best one per line)
"""The tolerant tool-call parser of the local model server."""

from __future__ import annotations

import json

import pytest

from airlock.localmodel._server_main import ParsedToolCall, parse_tool_calls

TOOLS = {"add", "read_file"}


def call(name: str, **args: object) -> ParsedToolCall:
    return ParsedToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False))


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # Qwen's own format.
        (
            '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
            None,
            [call("add", a=2, b=3)],
        ),
        # Several tagged calls, with text before.
        (
            'Let me add.\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
            '<tool_call>{"name": "read_file", "arguments": {"path": "x"}}</tool_call>',
            "Let me add.",
            [call("add", a=1, b=2), call("read_file", path="x")],
        ),
        # Unclosed tag at the end (generation stopped).
        ('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 1}}', None, [call("add", a=1, b=1)]),
        # Fenced JSON, the way small models often answer.
        ('```json\n{"name": "add", "arguments": {"a": 4, "b": 5}}\n```', None, [call("add", a=4, b=5)]),
        # Fence without a language, a list of calls.
        (
            'Sure:\n```\n[{"name": "add", "arguments": {"a": 1, "b": 2}}, '
            '{"name": "add", "arguments": {"a": 3, "b": 4}}]\n```\nDone.',
            "Sure:\n\nDone.",
            [call("add", a=1, b=2), call("add", a=3, b=4)],
        ),
        # Bare object in prose.
        (
            'I will call {"name": "add", "arguments": {"a": 7, "b": 8}} now.',
            "I will call  now.",
            [call("add", a=7, b=8)],
        ),
        # Arguments as a JSON string (OpenAI style).
        ('{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}', None, [call("add", a=1, b=2)]),
        # OpenAI-shaped item.
        (
            '{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 0}}}',
            None,
            [call("add", a=1, b=0)],
        ),
        # "parameters" instead of "arguments"; no arguments at all.
        (
            '<tool_call>{"name": "add", "parameters": {"a": 2, "b": 2}}</tool_call>',
            None,
            [call("add", a=2, b=2)],
        ),
        ('<tool_call>{"name": "read_file"}</tool_call>', None, [call("read_file")]),
        # Repairs inside tags: trailing comma, single quotes, doubled braces, missing brace.
        (
            '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2,},}</tool_call>',
            None,
            [call("add", a=1, b=2)],
        ),
        (
            "<tool_call>{'name': 'add', 'arguments': {'a': 1, 'b': True}}</tool_call>",
            None,
            [call("add", a=1, b=True)],
        ),
        (
            '<tool_call>{{"name": "add", "arguments": {"a": 5, "b": 6}}}</tool_call>',
            None,
            [call("add", a=5, b=6)],
        ),
        (
            '<tool_call>{"name": "add", "arguments": {"a": 5, "b": 6}</tool_call>',
            None,
            [call("add", a=5, b=6)],
        ),
        # Doubled braces bare.
        ('{{"name": "add", "arguments": {"a": 9, "b": 1}}}', None, [call("add", a=9, b=1)]),
        # Any fence language, the fence goes with the call.
        ('```python\n{"name": "add", "arguments": {"a": 1, "b": 1}}\n```', None, [call("add", a=1, b=1)]),
        # A tagged call to a tool that was not offered still is a call (the loop answers it).
        ('<tool_call>{"name": "unknown_tool", "arguments": {}}</tool_call>', None, [call("unknown_tool")]),
        # Unicode survives.
        (
            '<tool_call>{"name": "read_file", "arguments": {"path": "für.txt"}}</tool_call>',
            None,
            [call("read_file", path="für.txt")],
        ),
    ],
)
def test_recognised_shapes(text: str, content: str | None, calls: list[ParsedToolCall]) -> None:
    got_content, got_calls = parse_tool_calls(text, TOOLS)
    assert got_calls == calls
    assert got_content == content
    for c in got_calls:
        assert isinstance(json.loads(c.arguments), dict)


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 5.",
        '{"result": 5}',  # JSON, but not a call
        '{"name": "delete_everything", "arguments": {}}',  # not an offered tool
        "<tool_call>not json at all</tool_call>",
        '<tool_call>{"name": "add", "arguments": "not json"}</tool_call>',
        '<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>',
        '```json\n{"name": "nope", "arguments": {"a": 1}}\n```',  # not an offered tool
        '{"name": 42, "arguments": {}}',
        "{broken json",
        "",
        "[]",
    ],
)
def test_not_calls_stay_content(text: str) -> None:
    content, calls = parse_tool_calls(text, TOOLS)
    assert calls == []
    assert content == text


def test_without_tool_names_any_named_object_counts() -> None:
    content, calls = parse_tool_calls('{"name": "anything", "arguments": {"x": 1}}', None)
    assert calls == [call("anything", x=1)]
    assert content is None


def test_tags_take_precedence_over_bare_objects() -> None:
    text = 'Example: {"name": "add", "arguments": {"a": 0, "b": 0}}\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'
    content, calls = parse_tool_calls(text, TOOLS)
    assert calls == [call("add", a=1, b=1)]
    assert content == 'Example: {"name": "add", "arguments": {"a": 0, "b": 0}}'


def test_a_partly_valid_list_is_not_a_call() -> None:
    text = '```json\n[{"name": "add", "arguments": {}}, {"name": "nope", "arguments": {}}]\n```'
    assert parse_tool_calls(text, TOOLS) == (text, [])

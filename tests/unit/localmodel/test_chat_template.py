"""Rendering OpenAI conversations (with tools and tool results) through GGUF chat templates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airlock.localmodel._server_main import ChatTemplate, RequestError, normalise_messages, validate_tools

# The template stored in the Qwen2.5-Coder-1.5B-Instruct GGUF (tokenizer.chat_template).
QWEN_TEMPLATE = (Path(__file__).parent / "qwen25_chat_template.jinja").read_text(encoding="utf-8")

TINY = (
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "CALL {{ c.function.name }} {{ c.function.arguments | tojson }}"
    "{% endfor %}{% else %}{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if tools %}TOOLS {% for t in tools %}{{ t.function.name }} {% endfor %}{{ '\\n' }}{% endif %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    },
}

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "What is 2+3?"}, {"type": "text", "text": "Be exact."}],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
]


def test_tiny_template_with_tools_and_tool_results() -> None:
    template = ChatTemplate(TINY, bos_token="<s>", eos_token="</s>")
    prompt = template.render(normalise_messages(CONVERSATION), validate_tools([ADD_TOOL]))
    assert prompt == (
        "<s>[system]Be brief.\n"
        "[user]What is 2+3?\nBe exact.\n"
        '[assistant]CALL add {"a": 2, "b": 3}\n'
        "[tool]5\n"
        "TOOLS add \n"
        "[assistant]"
    )


def test_tiny_template_without_tools() -> None:
    prompt = ChatTemplate(TINY).render(normalise_messages([{"role": "developer", "content": "hi"}]), None)
    assert prompt == "[system]hi\n[assistant]"


def test_qwen_template_renders_tools_calls_and_results() -> None:
    template = ChatTemplate(QWEN_TEMPLATE, eos_token="<|im_end|>")
    prompt = template.render(normalise_messages(CONVERSATION), validate_tools([ADD_TOOL]))
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(ADD_TOOL, ensure_ascii=False) + "\n</tools>" in prompt
    assert "<|im_start|>user\nWhat is 2+3?\nBe exact.<|im_end|>\n" in prompt  # parts one per line
    # Arguments are rendered as the object, not a double-encoded JSON string.
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    assert f"<|im_start|>assistant\n{call}<|im_end|>\n" in prompt
    assert "<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_qwen_template_without_tools_uses_the_plain_system_prompt() -> None:
    template = ChatTemplate(QWEN_TEMPLATE)
    prompt = template.render(normalise_messages([{"role": "user", "content": "hi"}]), None)
    assert prompt == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_template_raise_exception_becomes_a_request_error() -> None:
    template = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(RequestError, match="roles must alternate"):
        template.render(normalise_messages([{"role": "user", "content": "x"}]))


def test_template_is_sandboxed() -> None:
    template = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(RequestError):
        template.render(normalise_messages([{"role": "user", "content": "x"}]))


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([], "non-empty"),
        ("hello", "non-empty"),
        ([{"role": "wizard", "content": "x"}], "unsupported role"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "image_url"),
        ([{"role": "user", "content": 42}], "content must be"),
        ([{"role": "assistant", "content": None, "tool_calls": [{"function": {}}]}], "function.name"),
        ([{"role": "assistant", "content": None, "tool_calls": "add"}], "must be an array"),
        (["just a string"], "must be an object"),
    ],
)
def test_malformed_messages_are_rejected(messages: object, match: str) -> None:
    with pytest.raises(RequestError, match=match):
        normalise_messages(messages)


@pytest.mark.parametrize(
    "tools",
    ["add", [{"type": "retrieval"}], [{"type": "function", "function": {"name": ""}}], [{"function": "add"}]],
)
def test_malformed_tools_are_rejected(tools: object) -> None:
    with pytest.raises(RequestError):
        validate_tools(tools)

"""How tools are shown to the local model (trimmed schemas) and its calls constrained (GBNF).

The grammar's JSON part comes from llama.cpp's converter, stood in for here by one that
names the schema; the grammar's own rules (text or tagged calls, text that starts no call)
are checked by matching strings against them with a small GBNF subset interpreter.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest

from airlock.localmodel import _tool_prompt as tp

BASH_SCHEMA: dict[str, Any] = {
    "additionalProperties": False,
    "properties": {
        "command": {
            "description": "The bash command line to run in the workspace.",
            "minLength": 1,
            "title": "Command",
            "type": "string",
        },
        "timeout_s": {
            "anyOf": [{"exclusiveMinimum": 0, "type": "number"}, {"type": "null"}],
            "default": None,
            "description": "Seconds before the command is killed (at most the configured limit).",
            "title": "Timeout S",
        },
    },
    "required": ["command"],
    "title": "BashInput",
    "type": "object",
}


def tool(name: str, parameters: dict[str, Any], description: str = "A tool.") -> dict[str, Any]:
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


def test_trim_schema_drops_the_noise_and_keeps_the_constraints() -> None:
    trimmed = tp.trim_schema(BASH_SCHEMA)
    assert trimmed == {
        "properties": {
            "command": {
                "description": "The bash command line to run in the workspace.",
                "minLength": 1,
                "type": "string",
            },
            "timeout_s": {
                "exclusiveMinimum": 0,
                "type": "number",
                "description": "Seconds before the command is killed (at most the configured limit).",
            },
        },
        "required": ["command"],
        "type": "object",
    }
    assert "title" not in json.dumps(trimmed) and "additionalProperties" not in json.dumps(trimmed)
    assert BASH_SCHEMA["title"] == "BashInput"  # the input is not modified


def test_trim_schema_keeps_properties_named_like_keywords_and_nested_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "title": "Title"},
            "items": {"type": "array", "items": {"type": "object", "title": "X", "properties": {}}},
            "meta": {"type": "object", "additionalProperties": {"type": "string", "title": "V"}},
        },
        "$defs": {"Inner": {"title": "Inner", "type": "integer", "default": None}},
    }
    trimmed = tp.trim_schema(schema)
    assert trimmed["properties"]["title"] == {"type": "string"}
    assert trimmed["properties"]["items"]["items"] == {"type": "object", "properties": {}}
    assert trimmed["properties"]["meta"]["additionalProperties"] == {"type": "string"}
    assert trimmed["$defs"] == {"Inner": {"type": "integer"}}


def test_short_description_keeps_the_first_sentence_within_the_limit() -> None:
    assert tp.short_description("Run a command. Background processes die.") == "Run a command."
    assert tp.short_description("  spaced\n  out  ") == "spaced out"
    long = "word " * 60
    cut = tp.short_description(long, limit=40)
    assert len(cut) <= 40 and cut.endswith("…") and not cut.startswith(" ")
    assert tp.short_description("version 1.5 is fine") == "version 1.5 is fine"


def test_trim_tools_shortens_descriptions_and_trims_parameters() -> None:
    tools = [tool("bash", BASH_SCHEMA, "Run a bash command. Background processes do not outlive it.")]
    (trimmed,) = tp.trim_tools(tools)
    assert trimmed["function"]["description"] == "Run a bash command."
    assert trimmed["function"]["parameters"] == tp.trim_schema(BASH_SCHEMA)
    assert tools[0]["function"]["description"].endswith("outlive it.")


def stub_converter(schema: str, order: list[str]) -> str:
    """Stands in for llama.cpp's converter: one rule per offered name, sub-rules below root."""
    parsed = json.loads(schema)
    variants = parsed.get("oneOf", [parsed])
    names = [v["properties"]["name"]["const"] for v in variants]
    assert order == ["name", "arguments"]
    alts = " | ".join(f"call-{i}" for i in range(len(names)))
    rules = [f"root ::= {alts}"]
    rules += [f'call-{i} ::= "{{\\"name\\": \\"{n}\\", \\"arguments\\": {{}}}}"' for i, n in enumerate(names)]
    return "\n".join(rules)


# -- a small GBNF interpreter (literals, [^...] classes, alternation, sequences, *, rule refs) --


def parse_gbnf(text: str) -> dict[str, list[list[tuple[str, str]]]]:
    rules: dict[str, list[list[tuple[str, str]]]] = {}
    token = re.compile(r'\s*(?:(?P<lit>"(?:[^"\\]|\\.)*")|(?P<cls>\[\^?(?:[^\]\\]|\\.)*\])(?P<star>\*)?'
                       r"|(?P<ref>[a-z0-9-]+)(?![:])|(?P<bar>\|))")  # fmt: skip
    for line in text.strip().splitlines():
        name, _, body = line.partition(" ::= ")
        alternatives: list[list[tuple[str, str]]] = [[]]
        pos = 0
        while pos < len(body):
            m = token.match(body, pos)
            assert m is not None and m.end() > pos, f"cannot read {body[pos:]!r}"
            pos = m.end()
            if m["lit"]:
                alternatives[-1].append(("lit", json.loads(m["lit"])))
            elif m["cls"]:
                alternatives[-1].append(("cls*" if m["star"] else "cls", m["cls"]))
            elif m["ref"]:
                alternatives[-1].append(("ref", m["ref"]))
            elif m["bar"]:
                alternatives.append([])
        rules[name] = alternatives
    return rules


def class_matches(cls: str, char: str) -> bool:
    """A GBNF character class (the subset the grammar uses reads the same as a regex's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "possible nested set" for a literal [
        return bool(char) and re.fullmatch(cls, char) is not None


def ends(rules: dict[str, Any], rule: str, text: str, pos: int) -> set[int]:
    """Every position where ``rule`` can end after matching ``text`` from ``pos``."""
    out: set[int] = set()
    for alternative in rules[rule]:
        positions = {pos}
        for kind, value in alternative:
            nxt: set[int] = set()
            for p in positions:
                if kind == "lit" and text.startswith(value, p):
                    nxt.add(p + len(value))
                elif kind == "cls" and p < len(text) and class_matches(value, text[p]):
                    nxt.add(p + 1)
                elif kind == "cls*":
                    q = p
                    nxt.add(q)
                    while q < len(text) and class_matches(value, text[q]):
                        q += 1
                        nxt.add(q)
                elif kind == "ref":
                    nxt |= ends(rules, value, text, p)
            positions = nxt
        out |= positions
    return out


def accepts(grammar: str, text: str) -> bool:
    rules = parse_gbnf(grammar)
    return len(text) in ends(rules, "root", text, 0)


TOOLS = [tool("bash", BASH_SCHEMA), tool("read_file", {"type": "object"})]


def test_the_grammar_accepts_text_and_tagged_calls_to_offered_tools() -> None:
    grammar = tp.tool_call_grammar(TOOLS, stub_converter)
    call = '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>'
    other = '<tool_call>\n{"name": "read_file", "arguments": {}}\n</tool_call>'
    assert accepts(grammar, "The answer is 6765.")
    assert accepts(grammar, "`fib.py` printed 6765")
    assert accepts(grammar, "<b>bold</b> answer")
    assert accepts(grammar, call)
    assert accepts(grammar, call + "\n" + other)
    fenced = '```json\n{"name": "bash", "arguments": {}}\n```'
    assert accepts(grammar, fenced) and accepts(grammar, fenced.replace("json", "", 1))
    assert accepts(grammar, call + "\n" + fenced)
    assert not accepts(grammar, '<tool_call>\n{"name": "rm", "arguments": {}}\n</tool_call>')
    assert not accepts(grammar, call + "\nand some text")


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "bash", "arguments": {"properties": {}}}\n</tool_call>',  # a schema echo
        '{"name": "bash", "arguments": {"command": "ls"}}',  # bare JSON: a call outside the tags
        '```json\n{"name": "bash"}\n```',  # a fenced call outside the schema
        "```python\nprint(6765)\n```",  # a listing instead of a call
        '[{"name": "bash"}]',
        "\n<tool_call>",  # whitespace, then a tag
        '<tools>\n{"name": "bash", "arguments": {}}\n</tools>',  # another tag
        " text",
        "",
    ],
)
def test_the_grammar_refuses_what_would_be_a_call_outside_it(text: str) -> None:
    assert not accepts(tp.tool_call_grammar(TOOLS, stub_converter), text)


def test_a_required_call_allows_no_text() -> None:
    grammar = tp.tool_call_grammar(TOOLS, stub_converter, allow_text=False)
    assert not accepts(grammar, "The answer is 6765.")
    assert accepts(grammar, '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>')


def test_without_parallel_calls_one_call_at_most() -> None:
    one = '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>'
    grammar = tp.tool_call_grammar(TOOLS, stub_converter, allow_text=False, parallel=False)
    assert accepts(grammar, one)
    assert not accepts(grammar, one + "\n" + one)
    assert accepts(tp.tool_call_grammar(TOOLS, stub_converter), one + "\n" + one)


def test_the_call_schema_names_each_tool_with_its_own_arguments() -> None:
    schema = tp.call_schema(TOOLS)
    assert [v["properties"]["name"] for v in schema["oneOf"]] == [{"const": "bash"}, {"const": "read_file"}]
    arguments = schema["oneOf"][0]["properties"]["arguments"]
    assert arguments == {**BASH_SCHEMA, "properties": {"command": BASH_SCHEMA["properties"]["command"]}}
    assert all(v["additionalProperties"] is False for v in schema["oneOf"])
    single = tp.call_schema(TOOLS[:1])
    assert single["properties"]["name"] == {"const": "bash"}


def test_a_converter_failure_or_a_rule_clash_is_a_value_error() -> None:
    def refuses(schema: str, order: list[str]) -> str:
        raise Exception("unsupported pattern")

    with pytest.raises(ValueError, match="unsupported pattern"):
        tp.tool_call_grammar(TOOLS, refuses)
    with pytest.raises(ValueError, match="clash"):
        tp.tool_call_grammar(TOOLS, lambda s, o: 'root ::= free-text\nfree-text ::= "x"')
    with pytest.raises(ValueError, match="no tools"):
        tp.tool_call_grammar([], stub_converter)


def test_the_grammar_leaves_out_optional_properties_it_cannot_keep_valid() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},  # required: stays, the tool checks it
            "t": {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "nested": {
                "type": "object",
                "properties": {"deep": {"type": "number", "maximum": 3}, "ok": {"type": "string"}},
            },
            "name": {"type": "string", "minLength": 1},
        },
        "required": ["n"],
    }
    kept = tp.grammar_schema(schema)
    assert list(kept["properties"]) == ["n", "name"]
    assert tp.grammar_schema(schema["properties"]["nested"])["properties"] == {"ok": {"type": "string"}}

"""How the local model server shows tools to a small model and constrains its calls.

Standard library only: the model server (``_server_main.py``) imports this module in the
runtime venv, which has no airlock.

- :func:`trim_tools`: the tools as the chat template renders them, without the schema noise a
  1.5B model mimics (``title``, ``additionalProperties``, null defaults, ``anyOf [X, null]``)
  and with descriptions cut to their first sentence. The model once "called" every tool with
  its schema as the arguments; what it is shown is what it copies.
- :func:`tool_call_grammar`: a GBNF grammar (llama.cpp) for the model's whole reply when tools
  are offered: either plain text, or one or more ``<tool_call>`` blocks (the Qwen/Hermes
  template's format) each holding ``{"name": <an offered tool>, "arguments": <an object that
  fits that tool's schema>}``. Generated under it, a call is valid by construction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The longest description a trimmed tool or property keeps (cut at a sentence or word).
DESCRIPTION_CHARS = 160
#: Keywords whose value maps names to schemas (the names are not keywords themselves).
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
#: Keywords whose value is a schema or a list of schemas.
_SCHEMA_VALUES = ("items", "additionalItems", "not", "if", "then", "else", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _within(key: str, value: Any, fn: Callable[[Any], Any], also: tuple[str, ...] = ()) -> Any:
    """The value of keyword ``key`` with ``fn`` applied to each schema (or list of schemas) it
    holds; keys in ``also`` hold one too. Other values are returned as they are."""
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: fn(sub) for name, sub in value.items()}
    if key in _SCHEMA_VALUES or key in _SCHEMA_LISTS or key in also:
        return fn(value)
    return value


#: Dropped everywhere: presentation the model does not need and tends to echo.
_NOISE = ("title", "$schema", "$id", "examples")

CALL_OPEN = "<tool_call>\n"
#: How a reply under the grammar begins when it is calls (free text may begin with neither).
CALL_STARTS = ("<tool_call>", "```")
CALL_CLOSE = "\n</tool_call>"
#: A plain-text reply may not start with these (each would begin a call outside the grammar:
#: a tag such as ``<tool_call>`` or ``<tools>``, bare JSON, a fenced block), nor with
#: whitespace.
TEXT_MAY_NOT_START = ("<tool", "{", "[", "```", " ", "\n", "\t", "\r")


def short_description(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """``text``'s first sentence, at most ``limit`` characters (cut at a word, marked ``…``)."""
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(?:\s|$)", text)
    first = match.group(1) if match else text
    if len(first) <= limit:
        return first
    cut = first[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null" and len(schema) == 1


def trim_schema(schema: Any) -> Any:
    """A JSON schema as shown to the model: the same constraints without the noise.

    Drops ``title``/``$schema``/``$id``/``examples``, boolean ``additionalProperties`` and
    ``default: null``; ``anyOf: [X, {"type": "null"}]`` becomes X (the property stays optional
    when it is not required); descriptions keep their first sentence. Property names are
    never touched (a property may be called ``title``).
    """
    if isinstance(schema, list):
        return [trim_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    variants = schema.get("anyOf")
    if isinstance(variants, list) and len(variants) == 2 and any(_is_null(v) for v in variants):
        other = next(v for v in variants if not _is_null(v))
        merged = {k: v for k, v in schema.items() if k != "anyOf"}
        if isinstance(other, dict):
            merged = {**other, **merged}
        return trim_schema(merged)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NOISE or (key == "additionalProperties" and isinstance(value, bool)):
            continue
        if key == "default" and value is None:
            continue
        if key == "description" and isinstance(value, str):
            out[key] = short_description(value)
        else:  # a non-boolean additionalProperties is a schema
            out[key] = _within(key, value, trim_schema, also=("additionalProperties",))
    return out


def trim_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` with each function's parameters trimmed and its description shortened."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        fn = dict(tool["function"])
        if isinstance(fn.get("description"), str):
            fn["description"] = short_description(fn["description"])
        if "parameters" in fn:
            fn["parameters"] = trim_schema(fn["parameters"])
        out.append({**tool, "function": fn})
    return out


# --------------------------------------------------------------------------------------------
# The grammar
# --------------------------------------------------------------------------------------------


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _char_class(chars: str) -> str:
    escaped = "".join(
        {"\n": "\\n", "\r": "\\r", "\t": "\\t", "]": "\\]", "\\": "\\\\", "^": "\\^", "-": "\\-"}.get(c, c)
        for c in sorted(set(chars))
    )
    return f"[^{escaped}\\x00]"


def _not_prefixed_rules(name: str, forbidden: Sequence[str]) -> list[str]:
    """Rules for a string's start that begins none of ``forbidden``: ``name`` matches the
    shortest prefix at which the text has left every forbidden literal behind."""
    rules: list[str] = []

    def node(rule: str, literals: list[str]) -> None:
        firsts = sorted({lit[0] for lit in literals})
        alternatives = [_char_class("".join(firsts))]
        for i, char in enumerate(firsts):
            rests = [lit[1:] for lit in literals if lit[0] == char]
            if any(not rest for rest in rests):
                continue  # the text would have begun a forbidden literal
            child = f"{rule}-{i}"
            alternatives.append(f"{_literal(char)} {child}")
            node(child, rests)
        rules.append(f"{rule} ::= " + " | ".join(alternatives))

    node(name, list(forbidden))
    return rules


#: Constraints llama.cpp's schema converter does not turn into grammar (numeric bounds among
#: them): a value under them can still be refused by the tool.
UNENFORCED = frozenset(
    {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems",
        "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "not", "if",
        "contains",
    }
)  # fmt: skip


def _unenforced(schema: Any) -> bool:
    """Whether ``schema`` (or a schema inside it) holds a constraint the grammar cannot keep."""
    if isinstance(schema, list):
        return any(_unenforced(s) for s in schema)
    if not isinstance(schema, dict):
        return False
    if UNENFORCED & schema.keys():
        return True
    found: list[bool] = []
    for key, value in schema.items():
        _within(key, value, lambda sub: found.append(_unenforced(sub)))
    return any(found)


def grammar_schema(schema: Any) -> Any:
    """``schema`` as the grammar enforces it: an optional property with a constraint the
    grammar cannot keep (e.g. ``timeout_s > 0``) is left out, so that every call generated is
    one the tool accepts. A required one stays (the tool checks it)."""
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    required = set(schema.get("required") or [])
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            value = {name: sub for name, sub in value.items() if name in required or not _unenforced(sub)}
        out[key] = _within(key, value, grammar_schema)
    return out


def call_schema(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call: ``{"name": <tool>, "arguments": <its parameters>}`` (as
    :func:`grammar_schema` has them)."""
    variants = []
    for tool in tools:
        fn = tool["function"]
        parameters = grammar_schema(fn.get("parameters") or {"type": "object"})
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return variants[0] if len(variants) == 1 else {"oneOf": variants}


def tool_call_grammar(
    tools: Sequence[Mapping[str, Any]],
    schema_to_gbnf: Callable[[str, list[str]], str],
    *,
    allow_text: bool = True,
    parallel: bool = True,
) -> str:
    """The GBNF of a reply when ``tools`` are offered: plain text or tagged calls (only calls
    without ``allow_text``: ``tool_choice`` ``required`` or a named function; one call at most
    without ``parallel``: ``parallel_tool_calls`` false).

    ``schema_to_gbnf(schema_json, prop_order)`` is llama.cpp's converter
    (``llama_cpp.llama_grammar.json_schema_to_gbnf``); its ``root`` rule becomes ``tool-call``.

    Raises:
        ValueError: the converter refused a schema, or its grammar cannot be embedded.
    """
    if not tools:
        raise ValueError("no tools to constrain calls to")
    try:
        converted = schema_to_gbnf(json.dumps(call_schema(tools)), ["name", "arguments"])
    except Exception as e:  # the converter raises bare Exceptions for unsupported schemas
        raise ValueError(f"the tools' schemas cannot become a grammar: {e}") from e
    lines = converted.splitlines()
    roots = [i for i, line in enumerate(lines) if line.startswith("root ::=")]
    body = "\n".join(line for i, line in enumerate(lines) if i not in roots)
    ours = "root|tool-call|tool-calls|tool-block|fenced-call|fence-lang|free-text"
    if len(roots) != 1 or re.search(rf"(?<![\w-])({ours})(?![\w-])", body):
        raise ValueError("the converted grammar's rule names clash with the reply's rules")
    lines[roots[0]] = "tool-call ::=" + lines[roots[0]][len("root ::=") :]
    calls = 'tool-block | tool-block "\\n" tool-calls' if parallel else "tool-block"
    head = [
        "root ::= tool-calls | free-text" if allow_text else "root ::= tool-calls",
        f"tool-calls ::= {calls}",
        f"tool-block ::= {_literal(CALL_OPEN)} tool-call {_literal(CALL_CLOSE)} | fenced-call",
        # Small coder models write calls as fenced JSON more often than in the template's tags.
        'fenced-call ::= "```" fence-lang "\\n" tool-call "\\n```"',
        "fence-lang ::= [a-z]*",
        "free-text ::= free-text-start [^\\x00]*",
        *_not_prefixed_rules("free-text-start", TEXT_MAY_NOT_START),
    ]
    return "\n".join(head + lines) + "\n"

"""The airlock local model server: OpenAI chat completions with real ``tool_calls`` on llama.cpp.

A STANDALONE script: it runs with the dedicated runtime venv's interpreter, which has
``llama_cpp`` (and its dependency ``jinja2``) but not airlock, so it imports only the standard
library, jinja2 and llama_cpp.

Why not a stock server: ``llama_cpp.server`` returns tool calls as plain text or drops tool
results, and ``llama-server --jinja`` only recognises ``<tool_call>`` tags, while small models
also write fenced or bare JSON. This server renders the GGUF's own chat template
(``tokenizer.chat_template``) with the request's tools and tool results, generates
deterministically (temperature 0, fixed seed unless the request says otherwise), and parses the
model's tool calls into OpenAI ``tool_calls`` with ``finish_reason: "tool_calls"``.

When tools are offered, the prompt shows their schemas trimmed of what a small model copies
(``--no-trim-schemas``: as sent), and generation follows a llama.cpp grammar built from them:
the reply is plain text or ``<tool_call>`` blocks whose JSON names an offered tool with
arguments that fit its schema (``--no-tool-grammar``: unconstrained). The tolerant parser
(tags, fences, bare JSON, repaired damage) reads the reply either way, and alone where no
grammar can be built. ``GET /health`` reports both switches and generation statistics.

Endpoints: ``POST /v1/chat/completions`` (also ``stream: true`` as server-sent events),
``GET /v1/models``, ``GET /health`` (503 while loading). One generation at a time. When the
environment variable ``AIRLOCK_LOCALMODEL_API_KEY`` is set, ``/v1/*`` requires
``Authorization: Bearer <key>``.

On stdout it prints one JSON line when listening (``{"event": "listening", ...}``) and one
when ready (``{"event": "ready", ...}``); logs go to stderr.

Usage: ``python _server_main.py --model FILE.gguf [--host 127.0.0.1] [--port 8765]
[--no-tool-grammar] [--no-trim-schemas]``
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import hmac
import importlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _sibling(name: str) -> Any:
    """A standard-library-only module beside this file: imported within the package (tests),
    loaded by path when this file runs as a script (``python -P``: its directory is not on
    ``sys.path``)."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    from importlib.util import module_from_spec, spec_from_file_location
    from pathlib import Path

    spec = spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with this one
        raise ImportError(f"cannot load {name}.py beside {__file__}")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool_prompt = _sibling("_tool_prompt")

API_KEY_ENV = "AIRLOCK_LOCALMODEL_API_KEY"
MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_TOKENS = 1024
# Generic chat-template end markers; the model's own EOS token is added at load.
BASE_STOP = ("<|im_end|>", "<|endoftext|>", "<|im_start|>", "<|eot_id|>")
# A model that has just called a tool sometimes goes on to invent the tool's answer.
TOOL_STOP = ("<tool_response>",)


class RequestError(Exception):
    """A client error, answered with an OpenAI-style error body."""

    def __init__(self, message: str, *, status: int = 400, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param


# --------------------------------------------------------------------------------------------
# Chat template rendering
# --------------------------------------------------------------------------------------------


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """The ``tojson`` filter as Hugging Face chat templates expect it (no HTML escaping)."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class ChatTemplate:
    """A Hugging Face style Jinja chat template (the GGUF's ``tokenizer.chat_template``)."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = _tojson
        self._template = env.from_string(source)
        self._template_error = jinja2.TemplateError
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str:
        """Render normalised messages (see ``normalise_messages``) and tools into a prompt.

        Raises:
            RequestError: the template rejects the conversation.
        """

        def raise_exception(message: str) -> None:
            raise RequestError(f"chat template: {message}")

        try:
            return self._template.render(
                messages=list(messages),
                tools=list(tools) if tools else None,
                add_generation_prompt=True,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                raise_exception=raise_exception,
                strftime_now=lambda fmt: datetime.now().strftime(fmt),
            )
        except RequestError:
            raise
        except (self._template_error, TypeError, ValueError) as e:
            raise RequestError(f"chat template could not render the conversation: {e}") from e


def _text_content(content: Any, where: str) -> str:
    """A message's text: a string, or its text parts one per line (as llama.cpp's server and
    vLLM join them; run together, a message's parts would merge their last and first words)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if (
                isinstance(part, dict)
                and part.get("type") in ("text", "input_text")
                and isinstance(part.get("text"), str)
            ):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise RequestError(f"{where}: content part of type {kind!r} is not supported (text only)")
        return "\n".join(texts)
    raise RequestError(f"{where}: content must be a string, a list of text parts or null")


def _arguments_object(arguments: Any) -> Any:
    """OpenAI sends arguments as a JSON string; chat templates expect the object."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    return {} if arguments is None else arguments


def normalise_messages(messages: Any) -> list[dict[str, Any]]:
    """Validate OpenAI chat messages and shape them the way HF chat templates expect.

    Content becomes a string; ``developer`` becomes ``system``; assistant tool call arguments
    become objects.

    Raises:
        RequestError: a message is malformed.
    """
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty array", param="messages")
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise RequestError(f"{where} must be an object", param="messages")
        role = msg.get("role")
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise RequestError(f"{where}: unsupported role {role!r}", param="messages")
        norm: dict[str, Any] = {"role": role, "content": _text_content(msg.get("content"), where)}
        if role == "assistant" and msg.get("tool_calls"):
            calls = msg["tool_calls"]
            if not isinstance(calls, list):
                raise RequestError(f"{where}.tool_calls must be an array", param="messages")
            norm_calls = []
            for j, call in enumerate(calls):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise RequestError(f"{where}.tool_calls[{j}] needs function.name", param="messages")
                function = {"name": fn["name"], "arguments": _arguments_object(fn.get("arguments"))}
                norm_calls.append({"id": call.get("id", ""), "type": "function", "function": function})
            norm["tool_calls"] = norm_calls
        if role == "tool":
            if isinstance(msg.get("tool_call_id"), str):
                norm["tool_call_id"] = msg["tool_call_id"]
            if isinstance(msg.get("name"), str):
                norm["name"] = msg["name"]
        out.append(norm)
    return out


def validate_tools(tools: Any) -> list[dict[str, Any]]:
    """Check OpenAI ``tools`` (``[{"type": "function", "function": {"name", ...}}]``).

    Raises:
        RequestError: a tool is malformed.
    """
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("'tools' must be an array", param="tools")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(fn, dict)
        ):
            raise RequestError(
                f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}", param="tools"
            )
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestError(f"tools[{i}].function.name must be a non-empty string", param="tools")
    return list(tools)


# --------------------------------------------------------------------------------------------
# Tolerant tool call parsing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedToolCall:
    """A tool call found in the model's text."""

    name: str
    arguments: str
    """The arguments object as a JSON string (OpenAI wire format)."""


_TAG_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")
_DECODER = json.JSONDecoder()


def _loads_tolerant(text: str) -> Any:
    """Parse JSON, repairing what small models get wrong; raise ValueError when hopeless."""
    text = text.strip()
    if text.startswith("```"):
        text = re.sub(r"^```[A-Za-z_]*\s*|\s*```$", "", text).strip()
    candidates = [text]
    if text.startswith("{{") and text.endswith("}}"):
        candidates.append(text[1:-1])  # mimicked the template's doubled braces
    candidates += [_TRAILING_COMMA_RE.sub(r"\1", c) for c in list(candidates)]
    candidates += [c + "}" * k for c in list(candidates) for k in (1, 2)]  # cut short
    for candidate in candidates:
        try:
            return json.loads(candidate, strict=False)  # raw newlines in strings: code
        except ValueError:
            pass
    for candidate in candidates:  # Python literals: single quotes, True/False/None
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict | list):
            return value
    raise ValueError("not JSON")


def _as_calls(value: Any, tool_names: Collection[str] | None) -> list[ParsedToolCall] | None:
    """The tool calls in a parsed JSON value, or None when it is not (entirely) tool calls."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls: list[ParsedToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        if isinstance(item.get("function"), dict):  # OpenAI shape {"type": "function", "function": {...}}
            item = item["function"]
        name = item.get("name")
        if name is None and isinstance(item.get("function"), str):
            name = item["function"]
        if not isinstance(name, str) or not name or (tool_names is not None and name not in tool_names):
            return None
        args: Any = None
        for key in ("arguments", "parameters", "args", "input"):
            if key in item:
                args = item[key]
                break
        if args is None:
            args = {}
        if isinstance(args, str):
            try:
                args = _loads_tolerant(args) if args.strip() else {}
            except ValueError:
                return None
        if not isinstance(args, dict):
            return None
        calls.append(ParsedToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False)))
    return calls


def _bare_objects(text: str) -> Iterator[tuple[int, int, Any]]:
    """Every top-level JSON object in ``text`` as (start, end, value)."""
    pos = 0
    while (start := text.find("{", pos)) != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            if text.startswith("{{", start):  # doubled braces around an object
                try:
                    value, end = _DECODER.raw_decode(text, start + 1)
                    if text.startswith("}", end):
                        yield start, end + 1, value
                        pos = end + 1
                        continue
                except ValueError:
                    pass
            pos = start + 1
            continue
        yield start, end, value
        pos = end


def _cut(text: str, spans: list[tuple[int, int]]) -> str | None:
    kept, last = [], 0
    for start, end in sorted(spans):
        kept.append(text[last:start])
        last = end
    kept.append(text[last:])
    rest = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()
    return rest or None


def parse_tool_calls(
    text: str, tool_names: Collection[str] | None = None
) -> tuple[str | None, list[ParsedToolCall]]:
    """Split model output into remaining content and tool calls.

    Recognised, in order of precedence: ``<tool_call>...</tool_call>`` blocks (also unclosed at
    the end), fenced code blocks holding a call or a list of calls, bare JSON objects
    ``{"name": ..., "arguments": ...}``. Inside tags and fences, common damage is repaired
    (trailing commas, Python literals, doubled or missing closing braces). Tagged calls count
    whatever tool they name (the agent loop answers an unknown tool with an error the model can
    read); fenced and bare ones only when ``tool_names`` is None or holds their name, so that
    ordinary JSON in an answer stays content.

    Returns:
        The text left after removing the calls (None when nothing is left) and the calls.
    """
    calls: list[ParsedToolCall] = []
    spans: list[tuple[int, int]] = []
    for m in _TAG_RE.finditer(text):
        body = m.group(1)
        found: list[ParsedToolCall] | None = None
        try:
            found = _as_calls(_loads_tolerant(body), None)
        except ValueError:
            parsed = [_as_calls(v, None) for _, _, v in _bare_objects(body)]
            if parsed and all(p is not None for p in parsed):
                found = [c for p in parsed if p is not None for c in p]
        if found:
            calls += found
            spans.append(m.span())
    if calls:
        return _cut(text, spans), calls
    data_spans: list[tuple[int, int]] = []  # fenced JSON that is not calls: data, not calls
    for m in _FENCE_RE.finditer(text):
        try:
            value = _loads_tolerant(m.group(2))
        except ValueError:
            continue
        found = _as_calls(value, tool_names)
        if found:
            calls += found
            spans.append(m.span())
        else:
            data_spans.append(m.span())
    if calls:
        return _cut(text, spans), calls
    for start, end, value in _bare_objects(text):
        if any(a <= start < b for a, b in data_spans):
            continue
        found = _as_calls(value, tool_names)
        if found:
            calls += found
            spans.append((start, end))
    if not calls:
        return text, []
    return _cut(text, spans), calls


# --------------------------------------------------------------------------------------------
# The model backend
# --------------------------------------------------------------------------------------------


@dataclass
class Completion:
    """One generation's result."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    #: Prompt tokens actually evaluated (the rest came from the cache of the previous prompt).
    prompt_evaluated: int = 0
    #: Milliseconds evaluating the prompt, and generating after it (sampling and grammar included).
    prompt_ms: float = 0.0
    generation_ms: float = 0.0
    #: Generated under a tool call grammar.
    constrained: bool = False


@dataclass(frozen=True)
class ToolOptions:
    """How tools are shown to the model and its calls generated (server-wide switches)."""

    #: Constrain replies to plain text or valid calls (a grammar from the tools' schemas).
    grammar: bool = True
    #: Show schemas trimmed of the noise small models copy (see ``_tool_prompt.trim_tools``).
    trim: bool = True


@dataclass
class Stats:
    """What the server has generated since it started (``GET /health``), for benchmarks."""

    completions: int = 0
    constrained: int = 0
    prompt_tokens: int = 0
    prompt_evaluated: int = 0
    prompt_ms: float = 0.0
    completion_tokens: int = 0
    generation_ms: float = 0.0
    #: Tool calls read from the replies, and of those, the ones generated under the grammar's
    #: call rule (the rest the tolerant parser found in free text or unconstrained replies).
    calls: int = 0
    calls_constrained: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, result: Completion, calls: int) -> None:
        with self.lock:
            self.completions += 1
            self.constrained += result.constrained
            self.prompt_tokens += result.prompt_tokens
            self.prompt_evaluated += result.prompt_evaluated
            self.prompt_ms += result.prompt_ms
            self.completion_tokens += result.completion_tokens
            self.generation_ms += result.generation_ms
            self.calls += calls
            # Under the grammar a reply that starts like a call is one: text may not.
            began_as_call = result.text.startswith(tool_prompt.CALL_STARTS)
            self.calls_constrained += calls if result.constrained and began_as_call else 0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            out = {k: v for k, v in vars(self).items() if k != "lock"}
        out["generation_ms_per_token"] = (
            round(self.generation_ms / self.completion_tokens, 2) if self.completion_tokens else None
        )
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}


@dataclass
class Backend:
    """The loaded llama.cpp model and its chat template."""

    llm: Any
    template: ChatTemplate
    n_ctx: int
    stop: tuple[str, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The ``llama_cpp`` module: grammars (``llama_grammar``), the grammar check and the
    #: performance counters. None: generation is never constrained nor timed in detail.
    native: Any | None = None
    #: Checked grammars by their text (None: llama.cpp refused it); bounded.
    _grammars: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, model_path: str, *, n_ctx: int, n_threads: int | None, seed: int) -> Backend:
        """Load the GGUF and its chat template (from the file's metadata)."""
        llama_cpp = importlib.import_module("llama_cpp")
        if n_threads is None:  # llama-cpp-python's default is half the CPUs for generation
            n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        llm = llama_cpp.Llama(
            model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False
        )
        source = llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise RuntimeError(f"{model_path} has no tokenizer.chat_template in its metadata")

        def token_text(token_id: int) -> str:
            if token_id < 0:
                return ""
            return bytes(llm.detokenize([token_id], special=True)).decode("utf-8", "replace")

        eos = token_text(llm.token_eos())
        template = ChatTemplate(source, bos_token=token_text(llm.token_bos()), eos_token=eos)
        stop = tuple(dict.fromkeys([*BASE_STOP, *([eos] if eos else [])]))
        return cls(llm=llm, template=template, n_ctx=int(llm.n_ctx()), stop=stop, native=llama_cpp)

    def tool_grammar(
        self, tools: Sequence[dict[str, Any]], *, allow_text: bool, parallel: bool = True
    ) -> Any | None:
        """A ``LlamaGrammar`` that lets the model write text or calls to ``tools`` only (one at
        most without ``parallel``), or None where one cannot be built (the tolerant parser then
        does what it can)."""
        grammars = getattr(self.native, "llama_grammar", None)
        if grammars is None:
            return None
        try:
            text = tool_prompt.tool_call_grammar(
                tools, grammars.json_schema_to_gbnf, allow_text=allow_text, parallel=parallel
            )
        except ValueError as e:
            print(f"tool calls unconstrained: {e}", file=sys.stderr)
            return None
        with self.lock:
            if text not in self._grammars:
                if len(self._grammars) >= 64:
                    self._grammars.clear()
                self._grammars[text] = self._checked_grammar(grammars, text)
            return self._grammars[text]

    def _checked_grammar(self, grammars: Any, text: str) -> Any | None:
        """The grammar, once llama.cpp has parsed it: a grammar it refuses would crash the
        sampler, so it is tried here first (a stand-in without the check passes as is)."""
        grammar = grammars.LlamaGrammar.from_string(text, verbose=False)
        init = getattr(self.native, "llama_sampler_init_grammar", None)
        free = getattr(self.native, "llama_sampler_free", None)
        if init is None or free is None:
            return grammar
        sampler = init(self.llm._model.vocab, text.encode("utf-8"), b"root")
        if not sampler:
            print(f"tool calls unconstrained: llama.cpp refused the grammar:\n{text}", file=sys.stderr)
            return None
        free(sampler)
        return grammar

    def _perf(self) -> tuple[float, int]:
        """(ms, tokens) of prompt evaluation since the last reset; (0, 0) when unknown."""
        read = getattr(self.native, "llama_perf_context", None)
        if read is None:
            return 0.0, 0
        data = read(self.llm.ctx)
        return float(data.t_p_eval_ms), int(data.n_p_eval)

    def _reset_perf(self) -> None:
        reset = getattr(self.native, "llama_perf_context_reset", None)
        if reset is not None:
            reset(self.llm.ctx)

    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int | None,
        sampling: dict[str, Any],
        stop: Sequence[str],
        grammar: Any | None = None,
    ) -> Completion:
        """Generate from a rendered prompt (one at a time), under ``grammar`` when given.

        Raises:
            RequestError: the prompt does not fit the context window.
        """
        with self.lock:
            tokens = list(self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
            room = self.n_ctx - len(tokens)
            if room <= 0:
                raise RequestError(
                    f"the prompt has {len(tokens)} tokens; this server's context window is {self.n_ctx}",
                    code="context_length_exceeded",
                    param="messages",
                )
            limit = min(max_tokens or DEFAULT_MAX_TOKENS, room)
            extra = {"grammar": grammar} if grammar is not None else {}
            self._reset_perf()
            started = time.perf_counter()
            out = self.llm.create_completion(
                prompt=tokens,
                max_tokens=limit,
                stop=list(dict.fromkeys([*self.stop, *stop])),
                **sampling,
                **extra,
            )
            total_ms = (time.perf_counter() - started) * 1000
            prompt_ms, evaluated = self._perf()
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice.get("text") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", len(tokens))),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            prompt_evaluated=evaluated,
            prompt_ms=prompt_ms,
            generation_ms=max(0.0, total_ms - prompt_ms),
            constrained=grammar is not None,
        )


# --------------------------------------------------------------------------------------------
# Chat completions
# --------------------------------------------------------------------------------------------


def _sampling(body: dict[str, Any], default_seed: int) -> dict[str, Any]:
    def number(key: str, default: float, lo: float, hi: float) -> float:
        value = body.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
            raise RequestError(f"'{key}' must be a number in [{lo}, {hi}]", param=key)
        return float(value)

    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RequestError("'seed' must be an integer", param="seed")
    return {
        "temperature": number("temperature", 0.0, 0.0, 2.0),
        "top_p": number("top_p", 1.0, 0.0, 1.0),
        "frequency_penalty": number("frequency_penalty", 0.0, -2.0, 2.0),
        "presence_penalty": number("presence_penalty", 0.0, -2.0, 2.0),
        "seed": default_seed if seed is None else seed,
    }


def _stop_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise RequestError("'stop' must be a string or an array of strings", param="stop")


@dataclass(frozen=True)
class ToolChoice:
    """What ``tools`` and ``tool_choice`` ask of a reply."""

    #: Tools are offered (shown in the prompt).
    offer: bool
    #: The names that count as calls.
    names: frozenset[str]
    #: The reply must be calls (``required`` or a named function), not text.
    required: bool = False
    #: More than one call may be made (``parallel_tool_calls``, default true).
    parallel: bool = True


def _tool_filter(tools: list[dict[str, Any]], tool_choice: Any, parallel: Any = True) -> ToolChoice:
    """Whether to offer tools, which names count as calls, whether a call is required and
    whether several may be made."""
    if not isinstance(parallel, bool):
        raise RequestError("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls")
    names = frozenset(t["function"]["name"] for t in tools)
    if not tools or tool_choice == "none":
        return ToolChoice(False, frozenset())
    if tool_choice in (None, "auto", "required"):
        return ToolChoice(True, names, required=tool_choice == "required", parallel=parallel)
    if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        chosen = tool_choice["function"].get("name")
        if chosen not in names:
            raise RequestError(f"tool_choice names unknown tool {chosen!r}", param="tool_choice")
        return ToolChoice(True, frozenset({chosen}), required=True, parallel=parallel)
    raise RequestError("'tool_choice' must be 'none', 'auto', 'required' or a function", param="tool_choice")


def chat_completion(
    backend: Backend,
    body: Any,
    *,
    model_id: str,
    default_seed: int = 0,
    options: ToolOptions | None = None,
    stats: Stats | None = None,
) -> dict[str, Any]:
    """Answer one ``/v1/chat/completions`` request body with a ``chat.completion`` object.

    With tools offered, the prompt shows them trimmed (``options.trim``) and generation is
    constrained to text or valid calls (``options.grammar``, where a grammar can be built).

    Raises:
        RequestError: the request is invalid.
    """
    options = options or ToolOptions()
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if body.get("n", 1) != 1:
        raise RequestError("only n=1 is supported", param="n")
    if body.get("logprobs"):
        raise RequestError("logprobs are not supported", param="logprobs")
    messages = normalise_messages(body.get("messages"))
    tools = validate_tools(body.get("tools"))
    choice = _tool_filter(tools, body.get("tool_choice"), body.get("parallel_tool_calls", True))
    offer, names = choice.offer, choice.names
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise RequestError("'max_tokens' must be a positive integer", param="max_tokens")
    sampling = _sampling(body, default_seed)
    shown = (tool_prompt.trim_tools(tools) if options.trim else tools) if offer else None
    prompt = backend.template.render(messages, shown)
    stop = _stop_list(body.get("stop")) + (list(TOOL_STOP) if offer else [])
    grammar = None
    if offer and options.grammar:
        callable_tools = [t for t in tools if t["function"]["name"] in names]
        grammar = backend.tool_grammar(
            callable_tools, allow_text=not choice.required, parallel=choice.parallel
        )
    result = backend.complete(prompt, max_tokens=max_tokens, sampling=sampling, stop=stop, grammar=grammar)

    content: str | None = result.text
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish_reason = result.finish_reason if result.finish_reason in ("stop", "length") else "stop"
    calls: list[ParsedToolCall] = []
    if offer:
        content, calls = parse_tool_calls(result.text, names)
        if not choice.parallel:  # unconstrained (no grammar): the first call only
            calls = calls[:1]
        if calls:
            seed_text = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
            message = {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {
                        "id": "call_" + hashlib.sha256(f"{seed_text}:{i}:{c.name}".encode()).hexdigest()[:24],
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for i, c in enumerate(calls)
                ],
            }
            finish_reason = "tool_calls"
    if stats is not None:
        stats.add(result, len(calls))
    created = int(time.time())
    return {
        "id": "chatcmpl-"
        + hashlib.sha256(f"{prompt}{created}{time.monotonic_ns()}".encode()).hexdigest()[:24],
        "object": "chat.completion",
        "created": created,
        "model": model_id,
        "system_fingerprint": "airlock-localmodel",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        },
    }


def stream_chunks(completion: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` events equivalent to a finished completion."""
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        out = dict(base)
        out["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
        return out

    yield chunk({"role": "assistant", "content": ""}, None)
    if message.get("content"):
        yield chunk({"content": message["content"]}, None)
    for i, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [dict(call, index=i)]}, None)
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        out = dict(base)
        out["choices"] = []
        out["usage"] = completion["usage"]
        yield out


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------


@dataclass
class ServerState:
    """Shared by the request handlers."""

    model_id: str
    model_path: str
    api_key: str | None
    default_seed: int
    tool_options: ToolOptions = field(default_factory=ToolOptions)
    stats: Stats = field(default_factory=Stats)
    backend: Backend | None = None
    load_error: str | None = None
    started: float = field(default_factory=time.time)


class Handler(BaseHTTPRequestHandler):
    """The HTTP endpoints (OpenAI wire format)."""

    protocol_version = "HTTP/1.1"
    server_version = "airlock-localmodel"
    state: ServerState  # set on the subclass built by ``make_server``

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"[{self.log_date_time_string()}] {self.address_string()} {format % args}\n")

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: RequestError) -> None:
        kind = "invalid_request_error" if err.status < 500 else "server_error"
        if err.status == HTTPStatus.UNAUTHORIZED:
            kind = "authentication_error"
        body = {"error": {"message": str(err), "type": kind, "param": err.param, "code": err.code}}
        self._send_json(err.status, body)

    def _authorised(self) -> bool:
        key = self.state.api_key
        if not key:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())

    def _read_body(self) -> Any:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            raise RequestError("Content-Length is required", status=HTTPStatus.LENGTH_REQUIRED)
        try:
            length = int(length_header)
        except ValueError as e:
            raise RequestError("invalid Content-Length") from e
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(
                f"request body of {length} bytes exceeds the limit of {MAX_BODY_BYTES}",
                status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError as e:
            raise RequestError(f"the request body is not valid JSON: {e}") from e

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        state = self.state
        if path == "/health":
            ready = state.backend is not None
            status = "ok" if ready else ("error" if state.load_error else "loading")
            payload = {
                "status": status,
                "model": state.model_id,
                "pid": os.getpid(),
                "error": state.load_error,
                "tool_options": {"grammar": state.tool_options.grammar, "trim": state.tool_options.trim},
                "stats": state.stats.snapshot(),
            }
            self._send_json(HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE, payload)
            return
        if path in ("/v1/models", f"/v1/models/{state.model_id}"):
            if not self._authorised():
                self._send_error(RequestError("invalid or missing API key", status=HTTPStatus.UNAUTHORIZED))
                return
            model = {
                "id": state.model_id,
                "object": "model",
                "created": int(state.started),
                "owned_by": "airlock",
            }
            self._send_json(
                HTTPStatus.OK, model if path != "/v1/models" else {"object": "list", "data": [model]}
            )
            return
        self._send_error(RequestError(f"no route GET {path}", status=HTTPStatus.NOT_FOUND))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            if path not in ("/v1/chat/completions", "/chat/completions"):
                raise RequestError(f"no route POST {path}", status=HTTPStatus.NOT_FOUND)
            if not self._authorised():
                raise RequestError("invalid or missing API key", status=HTTPStatus.UNAUTHORIZED)
            body = self._read_body()
            backend = self.state.backend
            if backend is None:
                raise RequestError("the model is still loading", status=HTTPStatus.SERVICE_UNAVAILABLE)
            completion = chat_completion(
                backend,
                body,
                model_id=self.state.model_id,
                default_seed=self.state.default_seed,
                options=self.state.tool_options,
                stats=self.state.stats,
            )
        except RequestError as e:
            self._send_error(e)
            return
        except Exception as e:
            print(f"internal error: {e!r}", file=sys.stderr)
            self._send_error(RequestError(f"internal error: {type(e).__name__}", status=500))
            return
        if isinstance(body, dict) and body.get("stream"):
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for event in stream_chunks(completion, include_usage):
                self.wfile.write(b"data: " + json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            return
        self._send_json(HTTPStatus.OK, completion)


def make_server(host: str, port: int, state: ServerState) -> ThreadingHTTPServer:
    """Bind the HTTP server (not yet serving)."""
    handler = type("BoundHandler", (Handler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until terminated."""
    parser = argparse.ArgumentParser(description="airlock local model server (OpenAI chat completions)")
    parser.add_argument("--model", required=True, help="path of the GGUF file")
    parser.add_argument("--model-id", default="local-model", help="the id reported by /v1/models")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument("--n-threads", type=int, default=None, help="default: all usable CPUs")
    parser.add_argument("--seed", type=int, default=0, help="default sampling seed")
    parser.add_argument(
        "--no-tool-grammar",
        action="store_true",
        help="do not constrain tool calls with a grammar (only the tolerant parser)",
    )
    parser.add_argument(
        "--no-trim-schemas", action="store_true", help="show the tools' schemas as they are sent"
    )
    args = parser.parse_args(argv)

    state = ServerState(
        model_id=args.model_id,
        model_path=args.model,
        api_key=os.environ.get(API_KEY_ENV) or None,
        default_seed=args.seed,
        tool_options=ToolOptions(grammar=not args.no_tool_grammar, trim=not args.no_trim_schemas),
    )
    try:
        server = make_server(args.host, args.port, state)
    except OSError as e:
        print(f"cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    host, port = args.host, server.server_port
    _emit({"event": "listening", "host": host, "port": port, "pid": os.getpid()})
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        state.backend = Backend.load(args.model, n_ctx=args.n_ctx, n_threads=args.n_threads, seed=args.seed)
    except Exception as e:
        state.load_error = f"{type(e).__name__}: {e}"
        print(f"failed to load model {args.model}: {state.load_error}", file=sys.stderr)
        server.shutdown()
        return 3
    _emit({"event": "ready", "load_seconds": round(time.monotonic() - started, 3)})
    print(f"serving {args.model_id} on http://{host}:{port}/v1", file=sys.stderr)
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A FAKE ``llama_cpp`` module: the subset of ``llama_cpp.Llama`` the model server uses.

The real llama-cpp-python takes minutes to build and a 1.1 GB model to run, so the fast
tests put this module on the server's ``PYTHONPATH`` instead. The server code, its HTTP and
its parsing are the real ones; only token generation is scripted. Controlled by environment:

- ``FAKE_LLAMA_REPLIES``: JSON array of completion texts, returned in order (the last repeats).
- ``FAKE_LLAMA_FAIL``: when set, loading raises RuntimeError with this message.
- ``FAKE_LLAMA_LOAD_SECONDS``: sleep this long while loading.
- ``FAKE_LLAMA_PROMPTS``: a file to which every rendered prompt is appended as a JSON line
  (with the grammar's text, when generation was constrained).

Tokens are the prompt's UTF-8 bytes; the chat template is a tiny ChatML with tools. The
``llama_grammar`` stand-in's converter writes one rule naming the call's schema (the real
one writes a grammar); a grammar does not constrain the scripted replies.
"""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace
from typing import Any

__version__ = "0.0.0-fake"

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    '{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", '
    '"arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}'
    "{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if tools %}<|im_start|>tools\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
EOS, BOS = 1_000_001, 1_000_000
_SPECIAL = {EOS: "<|im_end|>", BOS: "<|endoftext|>"}


class LlamaGrammar:
    """Holds a grammar's text, like the real one."""

    def __init__(self, text: str) -> None:
        self._grammar = text

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> LlamaGrammar:
        return cls(grammar)


def json_schema_to_gbnf(schema: str, prop_order: list[str] | None = None) -> str:
    """A one-rule stand-in: ``root ::= "<the schema>"`` (plus the order asked for)."""
    return f"root ::= {json.dumps(schema)} # order: {json.dumps(prop_order)}"


llama_grammar = SimpleNamespace(LlamaGrammar=LlamaGrammar, json_schema_to_gbnf=json_schema_to_gbnf)


class Llama:
    """Scripted stand-in for ``llama_cpp.Llama``."""

    def __init__(self, model_path: str, n_ctx: int = 512, **_: Any) -> None:
        if os.environ.get("FAKE_LLAMA_FAIL"):
            raise RuntimeError(os.environ["FAKE_LLAMA_FAIL"])
        time.sleep(float(os.environ.get("FAKE_LLAMA_LOAD_SECONDS", "0")))
        with open(model_path, "rb"):
            pass
        self._n_ctx = n_ctx
        self._replies: list[str] = json.loads(os.environ.get("FAKE_LLAMA_REPLIES", '["hello"]'))
        self._calls = 0
        self._lock = threading.Lock()
        self.metadata = {"tokenizer.chat_template": CHAT_TEMPLATE}

    def n_ctx(self) -> int:
        return self._n_ctx

    def token_eos(self) -> int:
        return EOS

    def token_bos(self) -> int:
        return BOS

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text)

    def detokenize(self, tokens: list[int], prev_tokens: Any = None, special: bool = False) -> bytes:
        return b"".join(_SPECIAL[t].encode() if t in _SPECIAL else bytes([t]) for t in tokens)

    def create_completion(self, prompt: list[int], max_tokens: int = 16, stop: Any = None, **kw: Any) -> Any:
        text_prompt = bytes(prompt).decode("utf-8")
        grammar = kw.pop("grammar", None)
        if os.environ.get("FAKE_LLAMA_PROMPTS"):
            with open(os.environ["FAKE_LLAMA_PROMPTS"], "a", encoding="utf-8") as f:
                record = {"prompt": text_prompt, "sampling": kw, "stop": stop}
                if grammar is not None:
                    record["grammar"] = grammar._grammar
                f.write(json.dumps(record) + "\n")
        with self._lock:
            reply = self._replies[min(self._calls, len(self._replies) - 1)]
            self._calls += 1
        finish = "stop"
        for s in stop or []:
            if s in reply:
                reply = reply[: reply.index(s)]
        if len(reply) > max_tokens:
            reply, finish = reply[:max_tokens], "length"
        return {
            "choices": [{"text": reply, "finish_reason": finish, "index": 0}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(reply.encode())},
        }

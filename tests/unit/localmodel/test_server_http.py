"""The server's HTTP surface in-process: OpenAI error bodies, request options, limits.

The backend's model is the fake ``fake_runtime/llama_cpp.py`` (scripted text); the HTTP
server, request validation, template rendering and parsing are the real ones.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from airlock.localmodel import _server_main as srv

from .localmodel_fakes import FAKE_RUNTIME


def fake_llama_module() -> Any:
    spec = importlib.util.spec_from_file_location("fake_llama_cpp", FAKE_RUNTIME / "llama_cpp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Served:
    def __init__(self, base: str, llm: Any, state: srv.ServerState) -> None:
        self.base, self.llm, self.state = base, llm, state

    def post(self, body: Any, **kw: Any) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.post(f"{self.base}/v1/chat/completions", content=content, trust_env=False, **kw)


@pytest.fixture
def served(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("FAKE_LLAMA_REPLIES", json.dumps(['{"name": "add", "arguments": {"a": 1, "b": 2}}']))
    monkeypatch.setenv("FAKE_LLAMA_PROMPTS", str(tmp_path / "prompts.jsonl"))
    fake = fake_llama_module()
    llm = fake.Llama(model_path=str(model), n_ctx=600)
    template = srv.ChatTemplate(llm.metadata["tokenizer.chat_template"], eos_token="<|im_end|>")
    backend = srv.Backend(llm=llm, template=template, n_ctx=600, stop=srv.BASE_STOP, native=fake)
    state = srv.ServerState(
        model_id="m", model_path=str(model), api_key=None, default_seed=7, backend=backend
    )
    server = srv.make_server("127.0.0.1", 0, state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_port}", llm, state)
    finally:
        server.shutdown()
        server.server_close()


ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
USER = [{"role": "user", "content": "1+2?"}]


def error_of(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"}
    return dict(body["error"])


def test_bare_json_call_becomes_tool_calls(served: Served) -> None:
    body = served.post({"model": "m", "messages": USER, "tools": [ADD]}).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    assert body["object"] == "chat.completion" and body["model"] == "m"


def test_call_ids_are_deterministic(served: Served) -> None:
    ids = [
        served.post({"messages": USER, "tools": [ADD]}).json()["choices"][0]["message"]["tool_calls"][0]["id"]
        for _ in range(2)
    ]
    assert ids[0] == ids[1]


def test_tool_choice_none_leaves_the_text_alone(served: Served) -> None:
    body = served.post({"messages": USER, "tools": [ADD], "tool_choice": "none"}).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["content"] == '{"name": "add", "arguments": {"a": 1, "b": 2}}'
    assert "tool_calls" not in body["choices"][0]["message"]


def test_named_tool_choice_must_exist(served: Served) -> None:
    resp = served.post(
        {"messages": USER, "tools": [ADD], "tool_choice": {"type": "function", "function": {"name": "x"}}}
    )
    assert resp.status_code == 400 and error_of(resp)["param"] == "tool_choice"


def test_without_tools_no_parsing(served: Served) -> None:
    body = served.post({"messages": USER}).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["content"].startswith('{"name"')


def test_sampling_options_reach_the_model(served: Served, tmp_path: Any) -> None:
    served.post({"messages": USER, "temperature": 0.5, "seed": 42, "stop": ["###"], "max_tokens": 5})
    served.post({"messages": USER})
    first, second = [json.loads(x) for x in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert first["sampling"]["temperature"] == 0.5 and first["sampling"]["seed"] == 42
    assert "###" in first["stop"] and "<|im_end|>" in first["stop"]
    assert second["sampling"]["temperature"] == 0.0 and second["sampling"]["seed"] == 7


def test_max_tokens_gives_finish_reason_length(served: Served) -> None:
    body = served.post({"messages": USER, "max_tokens": 5}).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 5


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b"{not json", 400, None),
        ({"messages": []}, 400, "messages"),
        ({"messages": USER, "n": 2}, 400, "n"),
        ({"messages": USER, "temperature": 9}, 400, "temperature"),
        ({"messages": USER, "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": USER, "stop": 3}, 400, "stop"),
        ({"messages": USER, "tools": [{"type": "function"}]}, 400, "tools"),
        ({"messages": [{"role": "user", "content": "x" * 700}]}, 400, "messages"),  # exceeds n_ctx=600
        ([1, 2], 400, None),
    ],
)
def test_invalid_requests_get_openai_errors(
    served: Served, body: Any, status: int, param: str | None
) -> None:
    resp = served.post(body)
    assert resp.status_code == status
    err = error_of(resp)
    assert err["type"] == "invalid_request_error" and err["param"] == param and err["message"]


def test_context_overflow_has_its_code(served: Served) -> None:
    resp = served.post({"messages": [{"role": "user", "content": "x" * 700}]})
    assert error_of(resp)["code"] == "context_length_exceeded"


def test_oversized_body_is_refused(served: Served) -> None:
    resp = served.post(b"x" * (srv.MAX_BODY_BYTES + 1))
    assert resp.status_code == 413


def test_unknown_route_and_models(served: Served) -> None:
    assert httpx.get(f"{served.base}/v1/nope", trust_env=False).status_code == 404
    assert httpx.post(f"{served.base}/v1/completions", content=b"{}", trust_env=False).status_code == 404
    models = httpx.get(f"{served.base}/v1/models", trust_env=False).json()
    assert models["object"] == "list" and models["data"][0]["id"] == "m"


def test_health_reports_loading(served: Served) -> None:
    backend, served.state.backend = served.state.backend, None
    try:
        resp = httpx.get(f"{served.base}/health", trust_env=False)
        assert resp.status_code == 503 and resp.json()["status"] == "loading"
        assert served.post({"messages": USER}).status_code == 503
    finally:
        served.state.backend = backend
    assert httpx.get(f"{served.base}/health", trust_env=False).json()["status"] == "ok"


def test_api_key_check(served: Served) -> None:
    served.state.api_key = "s3cret"
    assert served.post({"messages": USER}).status_code == 401
    assert error_of(served.post({"messages": USER}))["type"] == "authentication_error"
    ok = served.post({"messages": USER}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert httpx.get(f"{served.base}/v1/models", trust_env=False).status_code == 401


TITLED = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers. Both must fit in 64 bits.",
        "parameters": {
            "type": "object",
            "title": "AddInput",
            "additionalProperties": False,
            "properties": {"a": {"type": "integer", "title": "A"}, "b": {"type": "integer", "title": "B"}},
        },
    },
}


def recorded(tmp_path: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (tmp_path / "prompts.jsonl").read_text().splitlines()]


def test_offered_tools_are_shown_trimmed_and_calls_generated_under_a_grammar(
    served: Served, tmp_path: Any
) -> None:
    served.post({"messages": USER, "tools": [TITLED]})
    (record,) = recorded(tmp_path)
    assert '"title"' not in record["prompt"] and "additionalProperties" not in record["prompt"]
    assert "Add two integers." in record["prompt"] and "64 bits" not in record["prompt"]
    grammar = record["grammar"]
    assert grammar.startswith("root ::= tool-calls | free-text\n")
    assert "tool-call ::= " in grammar and '\\"const\\": \\"add\\"' in grammar
    assert '\\"additionalProperties\\": false' in grammar  # the grammar keeps the full schema


def test_a_required_or_named_call_allows_no_text(served: Served, tmp_path: Any) -> None:
    served.post({"messages": USER, "tools": [TITLED], "tool_choice": "required"})
    served.post({"messages": USER, "tools": [TITLED, ADD], "tool_choice": {"function": {"name": "add"}}})
    required, named = recorded(tmp_path)
    assert required["grammar"].startswith("root ::= tool-calls\n")
    assert named["grammar"].startswith("root ::= tool-calls\n")


def test_text_parts_of_a_message_are_read_one_per_line(served: Served, tmp_path: Any) -> None:
    parts = [{"type": "text", "text": "Sum the column."}, {"type": "text", "text": "Files given:"}]
    served.post({"messages": [{"role": "user", "content": parts}]})
    (record,) = recorded(tmp_path)
    assert "Sum the column.\nFiles given:" in record["prompt"]
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    bad = served.post({"messages": [{"role": "user", "content": [image]}]})
    assert bad.status_code == 400 and "image_url" in error_of(bad)["message"]


def test_parallel_tool_calls_false_allows_one_call(served: Served, tmp_path: Any) -> None:
    served.post({"messages": USER, "tools": [TITLED], "parallel_tool_calls": False})
    (record,) = recorded(tmp_path)
    assert "\ntool-calls ::= tool-block\n" in record["grammar"]
    bad = served.post({"messages": USER, "tools": [TITLED], "parallel_tool_calls": "no"})
    assert bad.status_code == 400 and error_of(bad)["param"] == "parallel_tool_calls"


def test_parallel_tool_calls_false_keeps_the_first_of_unconstrained_calls(served: Served) -> None:
    served.state.tool_options = srv.ToolOptions(grammar=False, trim=True)
    call = '<tool_call>\n{"name": "add", "arguments": {"a": %d, "b": 0}}\n</tool_call>'
    served.llm._replies = [call % 1 + "\n" + call % 2]
    both = served.post({"messages": USER, "tools": [ADD]}).json()["choices"][0]["message"]["tool_calls"]
    one = served.post({"messages": USER, "tools": [ADD], "parallel_tool_calls": False}).json()
    assert len(both) == 2
    [kept] = one["choices"][0]["message"]["tool_calls"]
    assert json.loads(kept["function"]["arguments"]) == {"a": 1, "b": 0}


def test_no_grammar_without_tools_or_with_tool_choice_none(served: Served, tmp_path: Any) -> None:
    served.post({"messages": USER})
    served.post({"messages": USER, "tools": [TITLED], "tool_choice": "none"})
    assert all("grammar" not in r for r in recorded(tmp_path))


def test_both_switches_off_send_the_schema_as_is_and_generate_freely(served: Served, tmp_path: Any) -> None:
    served.state.tool_options = srv.ToolOptions(grammar=False, trim=False)
    body = served.post({"messages": USER, "tools": [TITLED]}).json()
    (record,) = recorded(tmp_path)
    assert "grammar" not in record
    assert '"title": "AddInput"' in record["prompt"] and "64 bits" in record["prompt"]
    assert body["choices"][0]["finish_reason"] == "tool_calls"  # the tolerant parser still reads it


def test_health_reports_the_switches_and_what_was_generated(served: Served) -> None:
    served.post({"messages": USER, "tools": [ADD]})
    served.post({"messages": USER})
    health = httpx.get(f"{served.base}/health", trust_env=False).json()
    assert health["tool_options"] == {"grammar": True, "trim": True}
    stats = health["stats"]
    assert stats["completions"] == 2 and stats["constrained"] == 1
    assert stats["calls"] == 1 and stats["calls_constrained"] == 0  # the fake's bare JSON call
    assert stats["completion_tokens"] > 0 and stats["prompt_tokens"] > 0


def test_calls_in_a_reply_that_began_as_a_call_count_as_generated_under_the_grammar(served: Served) -> None:
    served.llm._replies = ['```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```']
    served.post({"messages": USER, "tools": [ADD]})
    served.state.tool_options = srv.ToolOptions(grammar=False)
    served.post({"messages": USER, "tools": [ADD]})
    stats = httpx.get(f"{served.base}/health", trust_env=False).json()["stats"]
    assert stats["calls"] == 2 and stats["calls_constrained"] == 1 and stats["constrained"] == 1

"""A local stand-in for an OpenAI-compatible server that speaks the real protocol on the wire.

:class:`FakeOpenAIServer` plays llama.cpp server / vLLM / Ollama / OpenAI for the real
``openai`` SDK over HTTP on 127.0.0.1: ``POST /v1/chat/completions`` answers with real
chat-completion JSON, ``GET /v1/models`` lists one model, requests are checked as the API
does (model and messages present, every ``role: tool`` message answering a ``tool_calls``
id of the preceding assistant message), ``Authorization: Bearer`` is optionally checked,
and errors use the API's body shape (``{"error": {"message", "type", "param", "code"}}``).
Build bodies with :func:`chat_completion` and :func:`tool_call`.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

from ._fake_http import FakeHTTPServer, FakeResponse, Handler, RecordedRequest

DEFAULT_MODEL = "local-model"

#: ``error.type`` / ``error.code`` the API uses for each status.
ERROR_SHAPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}

_ids = itertools.count(1)


def tool_call(id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """One entry of ``message.tool_calls`` (``arguments`` as given if a string, else JSON)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


def chat_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    model: str = DEFAULT_MODEL,
    usage: dict[str, Any] | None = None,
    refusal: str | None = None,
) -> dict[str, Any]:
    """A chat-completion response body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-fake{next(_ids):06d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": usage
        if usage is not None
        else {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def completion_stream(completion: dict[str, Any], *, piece_chars: int = 4) -> tuple[bytes, ...]:
    """The server-sent events of a streamed answer holding ``completion`` (as
    :func:`chat_completion` builds it, ``stream_options.include_usage`` on): the content in
    deltas of ``piece_chars`` characters, each tool call in one delta, then the finish reason,
    the usage chunk and ``[DONE]``."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return f"data: {json.dumps(body)}\n\n".encode()

    text = message.get("content") or ""
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": text[i : i + piece_chars]}) for i in range(0, len(text), piece_chars)]
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": index, **call}]}))
    events.append(chunk({}, choice["finish_reason"]))
    usage = {**base, "choices": [], "usage": completion["usage"]}
    events.append(f"data: {json.dumps(usage)}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return tuple(events)


def as_streamed(request: RecordedRequest, response: FakeResponse) -> FakeResponse:
    """A queued JSON completion answered as server-sent events when the request asked for a
    stream (``stream: true``), as the API answers it."""
    try:
        streamed = bool(request.json().get("stream"))
    except (ValueError, AttributeError):
        return response
    if not streamed or response.stream or response.status != 200 or not isinstance(response.body, dict):
        return response
    return FakeResponse(200, headers=response.headers, stream=completion_stream(response.body))


def openai_error(
    status: int,
    message: str = "error",
    *,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> FakeResponse:
    """An error response with the API's body shape (``headers``: e.g. ``retry-after-ms``)."""
    default_type, code = ERROR_SHAPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    body = {"error": {"message": message, "type": error_type or default_type, "param": None, "code": code}}
    return FakeResponse(status, body, headers=dict(headers or {}))


def validate_chat_request(body: Any) -> str | None:
    """Why an OpenAI-compatible server would reject this chat-completions body, or None."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    for key in ("model", "messages"):
        if key not in body:
            return f"Missing required parameter: '{key}'."
    for j, tool in enumerate(body.get("tools") or []):
        name = str((tool.get("function") or {}).get("name", ""))
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
            return f"Invalid 'tools[{j}].function.name': string does not match pattern '^[a-zA-Z0-9_-]+$'."
    open_calls: set[str] = set()
    for i, message in enumerate(body["messages"]):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value for 'messages[{i}].role': {role!r}"
        if role == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (messages[{i}].tool_call_id={message.get('tool_call_id')!r})"
                )
        else:
            open_calls = set()
    return validate_options(body)


def validate_options(body: dict[str, Any]) -> str | None:
    """Why the API would reject the body's ``reasoning_effort`` or ``response_format``."""
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in ("none", "minimal", "low", "medium", "high", "xhigh"):
        return f"Invalid value: {effort!r}. Supported values are: 'low', 'medium', and 'high'."
    fmt = body.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return f"Invalid value: {kind!r}. Supported values are: 'text', 'json_object', and 'json_schema'."
    if kind == "json_schema":
        schema = fmt.get("json_schema")
        if not isinstance(schema, dict) or "name" not in schema:
            return "Missing required parameter: 'response_format.json_schema.name'."
        if not isinstance(schema.get("schema", {}), dict):
            return "Invalid type for 'response_format.json_schema.schema': expected an object."
    return None


class FakeOpenAIServer(FakeHTTPServer):
    """Stand-in for an OpenAI-compatible server on 127.0.0.1 speaking real chat-completions JSON.

    Args:
        handler: answers requests when nothing is queued.
        require_api_key: when set, ``Authorization: Bearer <key>`` must match (else the
            API's 401 ``invalid_api_key``).
        validate: check each chat-completions body as the API does (400 on violation;
            a rejected request does not consume a queued answer).
        model: the model ``GET /v1/models`` lists.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        require_api_key: str | None = None,
        validate: bool = True,
        model: str = DEFAULT_MODEL,
    ) -> None:
        super().__init__(handler)
        self.require_api_key = require_api_key
        self.validate = validate
        self.model = model

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url`` (``…/v1``)."""
        return f"{self.origin}/v1"

    def reply(self, completion: dict[str, Any] | str | None = None, **kwargs: Any) -> None:
        """Queue a 200 answer: a completion body, or content (``kwargs`` go to :func:`chat_completion`)."""
        body = completion if isinstance(completion, dict) else chat_completion(completion, **kwargs)
        self.enqueue(FakeResponse(200, body))

    def fail(self, status: int, message: str = "error", *, error_type: str | None = None) -> None:
        """Queue an error answer with the API's body shape."""
        self.enqueue(openai_error(status, message, error_type=error_type))

    def reply_stream(
        self, content: str | None = None, *, delay_s: float = 0.0, piece_chars: int = 4, **kwargs: Any
    ) -> None:
        """Queue a streamed answer (server-sent events, ``delay_s`` apart) of the completion
        :func:`chat_completion` builds from ``content`` and ``kwargs``."""
        events = completion_stream(chat_completion(content, **kwargs), piece_chars=piece_chars)
        self.enqueue(FakeResponse(200, stream=events, stream_delay_s=delay_s))

    def chat_bodies(self) -> list[Any]:
        """The JSON bodies of the chat-completions requests received."""
        return [r.json() for r in self.requests if r.path.split("?")[0] == "/v1/chat/completions"]

    async def respond(self, request: RecordedRequest) -> FakeResponse:
        if self.require_api_key is not None and request.headers.get("authorization") != (
            f"Bearer {self.require_api_key}"
        ):
            return openai_error(401, "Incorrect API key provided.")
        path = request.path.split("?")[0]
        if request.method == "GET" and path == "/v1/models":
            return FakeResponse(
                200,
                {
                    "object": "list",
                    "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "local"}],
                },
            )
        if request.method != "POST" or path != "/v1/chat/completions":
            return openai_error(404, f"Unknown request URL: {request.method} {request.path}")
        if self.validate:
            try:
                problem = validate_chat_request(request.json())
            except (ValueError, KeyError, AttributeError, TypeError) as e:
                problem = f"malformed request body: {e}"
            if problem is not None:
                return openai_error(400, problem)
        return as_streamed(request, await super().respond(request))

    def default_response(self, request: RecordedRequest) -> FakeResponse:
        return openai_error(500, f"fake server: no response queued for {request.method} {request.path}")

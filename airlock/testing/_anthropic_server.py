"""A local stand-in for the Anthropic Messages API that speaks the real protocol on the wire.

:class:`FakeAnthropicServer` is not a mock of the SDK: the real ``anthropic`` SDK (or
any HTTP client, or a credential proxy in between) talks HTTP to it on 127.0.0.1. It
serves ``POST /v1/messages`` with real Messages API JSON, checks the request the way the
API does (required fields, roles, tool_result blocks first in a user message and
answering the previous assistant's tool_use ids), optionally checks ``x-api-key``, and
answers errors with the API's error body shape (``{"type": "error", "error": {...}}``).
Use the builders :func:`anthropic_message`, :func:`text_block`, :func:`tool_use_block`
and :func:`anthropic_error` to program it.

It speaks server-side compaction (the ``compact-2026-01-12`` beta) as the API does on the
wire: ``context_management`` (edits of type ``compact_20260112``, an ``input_tokens`` trigger
of at least 50,000) and ``compaction`` blocks are refused without that beta in the
``anthropic-beta`` header; a ``compaction`` block sent back must be one this server issued,
unchanged, and in an assistant message. :func:`compaction_block` and
:func:`iterations_usage` build what a compacting response holds (the block, and the usage of
each sampling iteration).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from ._fake_http import FakeHTTPServer, FakeResponse, Handler, RecordedRequest

DEFAULT_MODEL = "claude-haiku-4-5-20251001"

#: The API's ``error.type`` for each status it uses.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_ids = itertools.count(1)

#: The beta that enables server-side compaction, and its context-management edit.
COMPACTION_BETA = "compact-2026-01-12"
COMPACTION_EDIT = "compact_20260112"
#: The smallest compaction trigger the API accepts, in input tokens.
MIN_COMPACTION_TRIGGER = 50_000


def text_block(text: str) -> dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def compaction_block(summary: str | None) -> dict[str, Any]:
    """A ``compaction`` block: the summary and the opaque data a client sends back verbatim."""
    n = next(_ids)
    return {
        "type": "compaction",
        "content": summary,
        "encrypted_content": f"opaque-compaction-state-{n:06d}",
        "signature": f"sig-{n:06d}",
    }


def iterations_usage(*iterations: tuple[str, int, int]) -> dict[str, Any]:
    """A usage object with ``iterations`` (each ``(type, input_tokens, output_tokens)``, type
    ``compaction`` or ``message``); the top-level counters sum the ``message`` ones only, as
    the API's do."""
    items = [
        {
            "type": kind,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        for kind, tokens_in, tokens_out in iterations
    ]
    messages = [it for it in items if it["type"] == "message"]
    return {
        "input_tokens": sum(it["input_tokens"] for it in messages),
        "output_tokens": sum(it["output_tokens"] for it in messages),
        "iterations": items,
    }


def anthropic_message(
    content: list[dict[str, Any]] | str,
    *,
    stop_reason: str | None = "end_turn",
    model: str = DEFAULT_MODEL,
    usage: dict[str, Any] | None = None,
    stop_details: dict[str, Any] | None = None,
    stop_sequence: str | None = None,
) -> dict[str, Any]:
    """A Messages API response body (``content`` may be a plain string: one text block)."""
    blocks = [text_block(content)] if isinstance(content, str) else content
    return {
        "id": f"msg_fake{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "stop_details": stop_details,
        "usage": usage if usage is not None else {"input_tokens": 10, "output_tokens": 5},
    }


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_stream(message: dict[str, Any], *, piece_chars: int = 4) -> tuple[bytes, ...]:
    """The server-sent events of a streamed Messages API answer holding ``message`` (as
    :func:`anthropic_message` builds it): text in deltas of ``piece_chars`` characters, a
    tool_use's input as one JSON delta, other blocks whole."""
    usage = dict(message["usage"])
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        deltas: list[dict[str, Any]] = []
        opening = dict(block)
        if block["type"] == "text":
            opening["text"] = ""
            text = block["text"]
            pieces = [text[i : i + piece_chars] for i in range(0, len(text), piece_chars)]
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        elif block["type"] == "tool_use":
            opening["input"] = {}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        events += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")}
    events.append(_sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return tuple(events)


def anthropic_error(
    status: int,
    message: str = "error",
    *,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> FakeResponse:
    """An error response with the API's body shape and ``request-id`` header."""
    request_id = f"req_fake{next(_ids):06d}"
    body = {
        "type": "error",
        "error": {"type": error_type or ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": request_id,
    }
    return FakeResponse(status, body, headers={"request-id": request_id, **(headers or {})})


def _betas(request: RecordedRequest) -> set[str]:
    return {b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b.strip()}


def validate_context_management(body: dict[str, Any], betas: set[str]) -> str | None:
    """Why the API would reject the request's ``context_management`` (and compaction blocks)."""
    blocks = [
        (i, b)
        for i, m in enumerate(body.get("messages") or [])
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "compaction"
    ]
    management = body.get("context_management")
    if (management is not None or blocks) and COMPACTION_BETA not in betas:
        what = "context_management" if management is not None else f"messages.{blocks[0][0]}: compaction"
        return f"{what}: requires the beta header anthropic-beta: {COMPACTION_BETA}"
    if management is None:
        return None
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list) or not edits:
        return "context_management.edits: at least one edit is required"
    for j, edit in enumerate(edits):
        if not isinstance(edit, dict) or edit.get("type") != COMPACTION_EDIT:
            return f"context_management.edits.{j}.type: Input should be '{COMPACTION_EDIT}'"
        trigger = edit.get("trigger")
        if trigger is None:
            continue
        if not isinstance(trigger, dict) or trigger.get("type") != "input_tokens":
            return f"context_management.edits.{j}.trigger.type: Input should be 'input_tokens'"
        value = trigger.get("value")
        if not isinstance(value, int) or value < MIN_COMPACTION_TRIGGER:
            return (
                f"context_management.edits.{j}.trigger.value: must be an integer of at least "
                f"{MIN_COMPACTION_TRIGGER}"
            )
    return None


def thinking_block(thinking: str) -> dict[str, Any]:
    """A ``thinking`` content block (its signature is opaque; a client sends it back as is)."""
    return {"type": "thinking", "thinking": thinking, "signature": f"thinksig-{next(_ids):06d}"}


def validate_thinking(body: dict[str, Any]) -> str | None:
    """Why the API would reject the request's extended ``thinking`` (or its absence)."""
    thinking = body.get("thinking")
    if thinking is None or thinking.get("type") == "disabled":
        return None
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= body["max_tokens"]:
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    if body.get("temperature", 1) != 1 or "top_k" in body:
        return "`temperature` may only be set to 1 when thinking is enabled (and `top_k` not at all)"
    if (body.get("tool_choice") or {}).get("type", "auto") not in ("auto", "none"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    messages = body["messages"]
    if len(messages) > 1 and messages[-1]["role"] == "user":
        answer = messages[-2]["content"]
        blocks = answer if isinstance(answer, list) else []
        if any(b.get("type") == "tool_use" for b in blocks) and blocks[0].get("type") not in (
            "thinking",
            "redacted_thinking",
        ):
            return (
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` "
                "message must start with a thinking block."
            )
    return None


def validate_messages_request(body: Any) -> str | None:
    """Why the API would reject this ``/v1/messages`` body with a 400, or None."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for j, tool in enumerate(body.get("tools") or []):
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", str(tool.get("name", ""))):
            return f"tools.{j}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
    previous_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message["content"]
        blocks = [text_block(content)] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return f"messages.{i}.content: must be a string or a list of blocks"
        if role == "user" and any(b.get("type") == "compaction" for b in blocks):
            return f"messages.{i}: a compaction block belongs in an assistant message"
        if role == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results and blocks[: len(results)] != results:
                return (
                    f"messages.{i}: tool_result blocks must come FIRST in the user message's content, "
                    "before any other content"
                )
            unknown = [b["tool_use_id"] for b in results if b.get("tool_use_id") not in previous_tool_ids]
            if unknown:
                return f"messages.{i}: unexpected tool_use_id found in tool_result blocks: {unknown[0]}"
            previous_tool_ids = set()
        else:
            previous_tool_ids = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return None


def presented_api_key(request: RecordedRequest) -> str | None:
    """The key a request presents: ``x-api-key``, else an ``Authorization: Bearer`` token.

    (The API accepts both; recent SDKs send the key as a bearer token.)
    """
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    auth = request.headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


class FakeAnthropicServer(FakeHTTPServer):
    """Stand-in for the Anthropic API on 127.0.0.1 speaking the real Messages API JSON.

    Args:
        handler: answers requests when nothing is queued.
        require_api_key: when set, a request whose key (``x-api-key`` or bearer token,
            see :func:`presented_api_key`) differs gets the API's 401
            ``authentication_error`` (as a credential-proxy test needs).
        validate: check each ``/v1/messages`` body as the API does (400 on violation;
            a rejected request does not consume a queued answer).

    Point the SDK at :attr:`base_url`; program answers with :meth:`reply` / :meth:`fail`
    (or :meth:`enqueue` any :class:`FakeResponse`); read :attr:`requests` afterwards.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        require_api_key: str | None = None,
        validate: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(handler, host=host)
        self.require_api_key = require_api_key
        self.validate = validate
        #: The compaction blocks this server sent, as JSON text (one sent back must be one).
        self._issued: set[str] = set()

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url`` (it appends ``/v1/messages``)."""
        return self.origin

    def reply(self, content: dict[str, Any] | list[dict[str, Any]] | str, **kwargs: Any) -> None:
        """Queue a 200 answer: a full message body (dict), or the content (blocks or text)
        of one built by :func:`anthropic_message` with ``kwargs``."""
        body = content if isinstance(content, dict) else anthropic_message(content, **kwargs)
        self.enqueue(FakeResponse(200, body, headers={"request-id": f"req_fake{next(_ids):06d}"}))

    def fail(self, status: int, message: str = "error", *, error_type: str | None = None) -> None:
        """Queue an error answer with the API's body shape."""
        self.enqueue(anthropic_error(status, message, error_type=error_type))

    def reply_stream(
        self,
        content: list[dict[str, Any]] | str,
        *,
        delay_s: float = 0.0,
        piece_chars: int = 4,
        **kwargs: Any,
    ) -> None:
        """Queue a streamed answer (server-sent events, ``delay_s`` between them) of the
        message :func:`anthropic_message` builds from ``content`` and ``kwargs``."""
        events = anthropic_stream(anthropic_message(content, **kwargs), piece_chars=piece_chars)
        headers = {"request-id": f"req_fake{next(_ids):06d}"}
        self.enqueue(FakeResponse(200, headers=headers, stream=events, stream_delay_s=delay_s))

    def message_bodies(self) -> list[Any]:
        """The JSON bodies of the ``/v1/messages`` requests received."""
        return [r.json() for r in self.requests if r.path.split("?")[0] == "/v1/messages"]

    async def respond(self, request: RecordedRequest) -> FakeResponse:
        if self.require_api_key is not None and presented_api_key(request) != self.require_api_key:
            return anthropic_error(401, "invalid x-api-key")
        if request.method != "POST" or request.path.split("?")[0] != "/v1/messages":
            return anthropic_error(404, f"Not found: {request.method} {request.path}")
        if self.validate:
            try:
                body = request.json()
                problem = validate_messages_request(body) or validate_context_management(
                    body, _betas(request)
                )
                problem = problem or validate_thinking(body)
                problem = problem or self._foreign_compaction(body)
            except (ValueError, KeyError, AttributeError, TypeError) as e:
                problem = f"malformed request body: {e}"
            if problem is not None:
                return anthropic_error(400, problem)
        response = await super().respond(request)
        if response.status == 200 and isinstance(response.body, dict):
            for block in response.body.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "compaction":
                    self._issued.add(_canonical(block))
            if _asks_stream(request):  # a queued message, answered as the API streams it
                return FakeResponse(200, headers=response.headers, stream=anthropic_stream(response.body))
        return response

    def _foreign_compaction(self, body: dict[str, Any]) -> str | None:
        """Why a compaction block of the request is not one this server issued, unchanged."""
        for i, message in enumerate(body["messages"]):
            content = message["content"]
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "compaction" and _canonical(block) not in self._issued:
                    return f"messages.{i}: compaction block was modified or not issued by this server"
        return None

    def default_response(self, request: RecordedRequest) -> FakeResponse:
        return anthropic_error(500, f"fake server: no response queued for {request.method} {request.path}")


def _asks_stream(request: RecordedRequest) -> bool:
    try:
        return bool(request.json().get("stream"))
    except (ValueError, AttributeError):
        return False


def _canonical(block: dict[str, Any]) -> str:
    return json.dumps(block, sort_keys=True, separators=(",", ":"))

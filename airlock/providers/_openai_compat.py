"""A provider for any OpenAI-compatible chat-completions server (llama.cpp server, vLLM,
Ollama, OpenAI itself), through the official ``openai`` SDK (async client).

Mapping: ``system`` becomes the first ``system`` message; ``tool_use`` parts become the
assistant's ``tool_calls`` (arguments as a JSON string) and ``tool_result`` parts become
``role: tool`` messages (an error result's text is prefixed ``[error] ``, as the format
has no error flag). Tool-call arguments that are not a JSON object are passed on as
``{"_raw": "<the text>"}`` so the tool's schema validation rejects them readably. Another
provider's compaction part is sent as its summary's text. The SDK's own retries of a call
are reported as ``ProviderResponse.retries``.

Usage follows the Anthropic convention used across providers: ``input_tokens`` is the
uncached prompt, ``cache_read_tokens`` the cached part (``prompt_tokens_details``).
``output_tokens`` is ``completion_tokens``, which already holds a reasoning model's
reasoning tokens (``completion_tokens_details.reasoning_tokens``): they are priced once, as
completion tokens.

Options of the spec: ``reasoning_effort`` and ``response_format`` (``json_object``, or
``json_schema`` with its name, schema and ``strict``) go on every request as the API names
them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from airlock.errors import SpecError
from airlock.spec import ProviderSpec
from airlock.turn import (
    CompactionPart,
    ContentPart,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    TextSink,
    TokenUsage,
    ToolResultPart,
    ToolUsePart,
)
from layer0 import TurnError

from ._attempts import EVENT_HOOKS, attempts, retries
from ._common import BY_STATUS, ErrorKind, map_sdk_error, resolve_api_key, unexpected_error
from ._tool_names import decode_tool_names, encode_tool_names

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

log = logging.getLogger(__name__)

#: Every finish_reason of the chat-completions API that maps to a stop reason.
OPENAI_FINISH_REASONS: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}

#: Every exception class the ``openai`` package exports → TurnError kind.
OPENAI_ERROR_KINDS: dict[str, ErrorKind | Literal["by_status"]] = {
    "OpenAIError": "other",
    "APIError": "other",
    "APIStatusError": BY_STATUS,
    "APIConnectionError": "retryable",
    "APITimeoutError": "retryable",
    "APIResponseValidationError": "model",
    "BadRequestError": "model",
    "UnprocessableEntityError": "model",
    "AuthenticationError": "non_retryable",
    "OAuthError": "non_retryable",
    "PermissionDeniedError": "non_retryable",
    "NotFoundError": "non_retryable",
    "ConflictError": "retryable",
    "RateLimitError": "retryable",
    "InternalServerError": BY_STATUS,
    "ContentFilterFinishReasonError": "model",
    "LengthFinishReasonError": "model",
    "InvalidWebhookSignatureError": "non_retryable",
    "WebSocketConnectionClosedError": "retryable",
    "WebSocketQueueFullError": "retryable",
}

_MTOK = Decimal(1_000_000)


def map_openai_error(exc: BaseException) -> TurnError:
    """The TurnError for an ``openai`` SDK exception (raise it ``from exc``)."""
    return map_sdk_error(exc, sdk="openai", table=OPENAI_ERROR_KINDS)


class OpenAICompatProvider:
    """Calls an OpenAI-compatible ``/chat/completions`` endpoint once per :meth:`complete`.

    Args:
        spec: kind ``openai_compat``; ``model`` is required (local servers accept any
            name), ``base_url`` ends in ``/v1`` (default: the SDK's), the key comes from
            ``api_key_env`` (unset: a placeholder; local servers ignore it).
            ``price_per_mtok_in``/``_out`` price the call (``0`` for a local model);
            unset, the cost is None.

    Raises:
        SpecError: no model, only one of the two prices, or an unset ``api_key_env``.
    """

    name = "openai_compat"

    def __init__(self, spec: ProviderSpec) -> None:
        if not spec.model:
            raise SpecError("openai_compat provider needs a model name (spec.model)")
        if (spec.price_per_mtok_in is None) != (spec.price_per_mtok_out is None):
            raise SpecError("set both price_per_mtok_in and price_per_mtok_out, or neither")
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient  # lazy: the SDK is heavy to import

        self.spec = spec
        self.model = spec.model
        self._client: AsyncOpenAI = AsyncOpenAI(
            api_key=resolve_api_key(spec.api_key_env),
            base_url=spec.base_url,
            timeout=spec.timeout_s,
            max_retries=spec.max_retries,
            http_client=DefaultAsyncHttpxClient(event_hooks=EVENT_HOOKS),
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP connections."""
        await self._client.close()

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        """The chat-completions request body for ``request``."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            messages.extend(_messages(m))
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": messages,
            "max_tokens": request.max_tokens or self.spec.max_tokens,
        }
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        temperature = request.temperature if request.temperature is not None else self.spec.temperature
        if temperature is not None:
            params["temperature"] = temperature
        params.update(_known_extra(request.extra))
        params.update(self._options())
        return params

    def _options(self) -> dict[str, Any]:
        """The spec's ``reasoning_effort`` and ``response_format``, as the API takes them."""
        out: dict[str, Any] = {}
        if self.spec.reasoning_effort is not None:
            out["reasoning_effort"] = self.spec.reasoning_effort
        fmt = self.spec.response_format
        if fmt is not None and fmt.type == "json_object":
            out["response_format"] = {"type": "json_object"}
        elif fmt is not None:
            schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.json_schema}
            if fmt.strict is not None:
                schema["strict"] = fmt.strict
            out["response_format"] = {"type": "json_schema", "json_schema": schema}
        return out

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """One chat-completions call.

        Raises:
            TurnError: as :meth:`complete_stream`.
        """
        return await self._call(request, None)

    async def complete_stream(self, request: ProviderRequest, on_text: TextSink) -> ProviderResponse:
        """One chat-completions call, streamed (``stream: true``, the usage in the last chunk):
        ``on_text`` gets each content delta; the response is the assembled completion's.

        Raises:
            TurnError: ``retryable`` (429, 5xx, timeout, connection), ``model`` (bad
                request, unknown finish_reason, no choices) or ``non_retryable``
                (authentication, permission, not found).
        """
        return await self._call(request, on_text)

    async def _call(self, request: ProviderRequest, on_text: TextSink | None) -> ProviderResponse:
        from openai import OpenAIError

        request, names = encode_tool_names(request)
        params = self.build_params(request)
        try:
            with attempts() as noted:
                completion = await self._send(params, on_text)
        except OpenAIError as e:
            raise map_openai_error(e) from e
        except Exception as e:  # the SDK let a foreign error through (e.g. a body that is not JSON)
            raise unexpected_error(e, sdk="openai_compat") from e
        try:
            response = response_from_completion(completion, requested_model=params["model"])
        except (ValidationError, AttributeError, TypeError) as e:  # a response of an unexpected shape
            raise unexpected_error(e, sdk="openai_compat") from e
        response = decode_tool_names(response, names)
        return response.model_copy(update={"cost": self._cost(response.usage), "retries": retries(noted)})

    async def _send(self, params: dict[str, Any], on_text: TextSink | None) -> ChatCompletion:
        """The completion: created at once, or streamed (content deltas to ``on_text``) and
        assembled by the SDK's stream state."""
        if on_text is None:
            created: ChatCompletion = await self._client.chat.completions.create(**params)
            return created
        from openai.lib.streaming.chat import ChatCompletionStreamState

        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        stream = await self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}
        )
        async with stream:
            async for chunk in stream:
                for event in state.handle_chunk(chunk):
                    if event.type == "content.delta" and event.delta:
                        await on_text(event.delta)
        # The snapshot, not get_final_completion(): that one refuses a ``length`` stop.
        from openai.types.chat import ChatCompletion

        return ChatCompletion.model_validate(state.current_completion_snapshot.model_dump())

    def _cost(self, usage: TokenUsage) -> Decimal | None:
        price_in, price_out = self.spec.price_per_mtok_in, self.spec.price_per_mtok_out
        if price_in is None or price_out is None:
            return None
        prompt = usage.input_tokens + (usage.cache_read_tokens or 0)
        return (prompt * price_in + usage.output_tokens * price_out) / _MTOK


def _messages(message: ProviderMessage) -> list[dict[str, Any]]:
    """One internal message → chat messages (tool results become separate ``tool`` messages)."""
    parts = message.content
    if message.role is Role.SYSTEM:
        return [{"role": "system", "content": "\n".join(p.text for p in parts if isinstance(p, TextPart))}]
    if message.role is Role.ASSISTANT:
        text = "".join(_text(p) for p in parts if isinstance(p, TextPart | CompactionPart))
        calls = [p for p in parts if isinstance(p, ToolUsePart)]
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments(c.input)},
                }
                for c in calls
            ]
        return [out]
    result: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": p.tool_use_id,
            "content": f"[error] {p.content}" if p.is_error else p.content,
        }
        for p in parts
        if isinstance(p, ToolResultPart)
    ]
    rest = [p for p in parts if not isinstance(p, ToolResultPart)]
    if rest:
        if len(rest) == 1 and isinstance(rest[0], TextPart):
            result.append({"role": "user", "content": rest[0].text})
        else:
            result.append({"role": "user", "content": [_user_part(p) for p in rest]})
    return result


def _text(part: TextPart | CompactionPart) -> str:
    if isinstance(part, CompactionPart):
        return part.as_text() + "\n\n"
    return part.text


def _user_part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart | CompactionPart):
        return {"type": "text", "text": _text(part)}
    if isinstance(part, ToolUsePart):  # a user message never carries one; keep it readable
        return {"type": "text", "text": json.dumps({"tool_use": part.name, "input": part.input})}
    assert not isinstance(part, ToolResultPart)
    url = part.data if part.source_type == "url" else f"data:{part.media_type};base64,{part.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _arguments(tool_input: Any) -> str:
    # A call recorded with unparseable arguments goes back exactly as the model wrote it.
    if isinstance(tool_input, dict) and set(tool_input) == {"_raw"} and isinstance(tool_input["_raw"], str):
        return tool_input["_raw"]
    return json.dumps(tool_input)


def _parse_arguments(arguments: str | None) -> Any:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


def _known_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """Forwarded keys of ``request.extra``: ``stop_sequences`` (as ``stop``), ``top_p``,
    ``seed``, ``tool_choice``, ``parallel_tool_calls``, and ``metadata.user_id`` (as ``user``).
    Others stay local."""
    out: dict[str, Any] = {}
    stops = extra.get("stop_sequences")
    if isinstance(stops, list) and all(isinstance(s, str) for s in stops):
        out["stop"] = stops
    top_p = extra.get("top_p")
    if isinstance(top_p, int | float) and not isinstance(top_p, bool):
        out["top_p"] = top_p
    seed = extra.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        out["seed"] = seed
    tool_choice = extra.get("tool_choice")
    if isinstance(tool_choice, str | Mapping):
        out["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)
    if isinstance(extra.get("parallel_tool_calls"), bool):
        out["parallel_tool_calls"] = extra["parallel_tool_calls"]
    metadata = extra.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    return out


def response_from_completion(completion: ChatCompletion, *, requested_model: str) -> ProviderResponse:
    """Map a chat completion (first choice); raise ``TurnError.model`` when it is unusable.

    ``stop`` with tool calls present counts as ``tool_calls`` (some servers report it so);
    a ``refusal`` text becomes a REFUSAL stop with the text as ``stop_detail``; the legacy
    ``function_call`` finish reason and unknown values are errors.
    """
    if not completion.choices:
        raise TurnError.model("openai_compat: the response has no choices")
    choice = completion.choices[0]
    message = choice.message
    content: list[ContentPart] = []
    if message.content:
        content.append(TextPart(text=message.content))
    for index, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        if getattr(call, "type", None) != "function" or function is None:
            log.warning(
                "openai_compat: dropping tool call of unsupported type %r", getattr(call, "type", None)
            )
            continue
        content.append(
            ToolUsePart(
                id=call.id or f"call_{index}",
                name=function.name,
                input=_parse_arguments(function.arguments),
            )
        )
    finish = str(choice.finish_reason) if choice.finish_reason is not None else None
    if finish == "function_call":
        raise TurnError.model(
            "openai_compat: legacy finish_reason 'function_call' is not supported (use tools)"
        )
    stop = OPENAI_FINISH_REASONS.get(finish) if finish is not None else None
    if stop is None:
        raise TurnError.model(f"openai_compat: unknown finish_reason {finish!r} (model {completion.model})")
    stop_detail = None
    if stop is StopReason.END_TURN and any(isinstance(p, ToolUsePart) for p in content):
        stop = StopReason.TOOL_USE
    if message.refusal:
        stop, stop_detail = StopReason.REFUSAL, message.refusal
    return ProviderResponse(
        content=content,
        stop_reason=stop,
        usage=_usage(completion),
        model=completion.model or requested_model,
        stop_detail=stop_detail,
        truncated=stop is StopReason.MAX_TOKENS,
    )


def _usage(completion: ChatCompletion) -> TokenUsage:
    u = completion.usage
    if u is None:
        return TokenUsage()
    details = u.prompt_tokens_details
    cached = details.cached_tokens if details is not None else None
    return TokenUsage(
        input_tokens=u.prompt_tokens - (cached or 0),
        output_tokens=u.completion_tokens,
        cache_read_tokens=cached,
    )

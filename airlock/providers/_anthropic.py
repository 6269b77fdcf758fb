"""The Anthropic Messages API provider, through the official ``anthropic`` SDK (async client).

The SDK is imported when a provider is constructed, never at package import, so the
runner starts fast when another provider is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from airlock.spec import ProviderSpec
from airlock.turn import (
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    TokenUsage,
    ToolResultPart,
    ToolUsePart,
)
from layer0 import TurnError

from ._common import BY_STATUS, ErrorKind, map_sdk_error, resolve_api_key, unexpected_error
from ._pricing import anthropic_cost

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message

log = logging.getLogger(__name__)

#: Used when neither the spec nor the request names a model.
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5-20251001"

#: Every ``stop_reason`` the Messages API documents, mapped explicitly.
ANTHROPIC_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "pause_turn": StopReason.PAUSE_TURN,
    "refusal": StopReason.REFUSAL,
    "model_context_window_exceeded": StopReason.CONTEXT_WINDOW_EXCEEDED,
}

#: Request fields ``messages.create`` takes as keyword arguments (others: ``extra_body``).
_SDK_PARAMS = frozenset(
    {"model", "max_tokens", "messages", "system", "tools", "metadata", "stop_sequences", "tool_choice"}
)

#: Response block types that carry nothing the loop can use or send back (thinking, and
#: the blocks of server-side tools, which we never offer). Dropped with a debug log.
IGNORED_BLOCK_TYPES = frozenset(
    {
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
    }
)

#: Every exception class the ``anthropic`` package exports → TurnError kind.
ANTHROPIC_ERROR_KINDS: dict[str, ErrorKind | Literal["by_status"]] = {
    # roots and non-HTTP failures
    "AnthropicError": "other",
    "APIError": "other",
    "APIStatusError": BY_STATUS,
    "APIConnectionError": "retryable",
    "APITimeoutError": "retryable",
    "APIResponseValidationError": "model",
    "APIWebhookValidationError": "non_retryable",
    "RetryableError": "retryable",
    "CredentialsError": "non_retryable",
    "IdentityTokenFileError": "non_retryable",
    "WorkloadIdentityError": "non_retryable",
    # 400 and its specific causes: the request is unusable as sent
    "BadRequestError": "model",
    "CMEKKeyDisabledError": "non_retryable",
    "CMEKKeyNetworkBlockedError": "non_retryable",
    "ClaudeCodeKeyCreatorNotMemberError": "non_retryable",
    "ClaudeCodeVersionTooOldError": "non_retryable",
    "OrganizationOnHoldError": "non_retryable",
    "OrganizationTypeNotSupportedError": "non_retryable",
    "ParentOrganizationRequiredError": "non_retryable",
    "RequestBodyEncodingInvalidError": "model",
    "RequestBodyEncodingUnsupportedError": "model",
    # other 4xx
    "AuthenticationError": "non_retryable",
    "PaymentRequiredError": "non_retryable",
    "LinkedOrganizationBillingUnavailableError": "non_retryable",
    "LinkedOrganizationSpendLimitReachedError": "non_retryable",
    "PermissionDeniedError": "non_retryable",
    "SandboxEgressRestrictedError": "non_retryable",
    "WorkspaceHumanReviewDisabledError": "non_retryable",
    "NotFoundError": "non_retryable",
    "RequestTimeoutError": "retryable",
    "ConflictError": "retryable",
    "PreconditionFailedError": "non_retryable",
    "ContentTooLargeError": "model",
    "RequestBodyTooLargeAfterDecodingError": "model",
    "UnprocessableEntityError": "model",
    "RequestHeaderFieldsTooLargeError": "model",
    "ClientClosedRequestError": "retryable",
    # 429: rate limits are transient; spend limits are not
    "RateLimitError": "retryable",
    "RampLimitExceededError": "retryable",
    "ContractSpendLimitReachedError": "non_retryable",
    "EnforcedSpendLimitReachedError": "non_retryable",
    # 5xx
    "InternalServerError": BY_STATUS,
    "OverloadedError": "retryable",
    "ServiceUnavailableError": "retryable",
    "CMEKContextUnavailableError": "retryable",
    "CMEKKeyUnreachableError": "retryable",
    "GatewayTimeoutError": "retryable",
    "HTTPNotImplementedError": "non_retryable",
}


def map_anthropic_error(exc: BaseException) -> TurnError:
    """The TurnError for an ``anthropic`` SDK exception (raise it ``from exc``)."""
    return map_sdk_error(exc, sdk="anthropic", table=ANTHROPIC_ERROR_KINDS)


class AnthropicProvider:
    """Calls the Anthropic Messages API once per :meth:`complete`.

    Args:
        spec: kind ``anthropic``; ``model`` defaults to :data:`DEFAULT_ANTHROPIC_MODEL`,
            ``base_url`` (e.g. a credential proxy) to the SDK's default, the key comes
            from the variable named by ``api_key_env`` (unset: a placeholder that a
            credential sidecar replaces), and ``max_retries`` is the SDK's own retry count.

    Raises:
        SpecError: ``api_key_env`` names a variable that is unset or empty.
    """

    name = "anthropic"

    def __init__(self, spec: ProviderSpec) -> None:
        from anthropic import AsyncAnthropic  # lazy: the SDK is heavy to import

        self.spec = spec
        self.model = spec.model or DEFAULT_ANTHROPIC_MODEL
        self._client: AsyncAnthropic = AsyncAnthropic(
            api_key=resolve_api_key(spec.api_key_env),
            base_url=spec.base_url,
            timeout=spec.timeout_s,
            max_retries=spec.max_retries,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP connections."""
        await self._client.close()

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        """The Messages API request body for ``request`` (without transport options)."""
        system_parts = [request.system] if request.system else []
        system_parts += [_text_of(m) for m in request.messages if m.role is Role.SYSTEM]
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens or self.spec.max_tokens,
            "messages": _messages(request.messages),
        }
        if system_parts:
            params["system"] = "\n\n".join(p for p in system_parts if p)
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        temperature = request.temperature if request.temperature is not None else self.spec.temperature
        if temperature is not None:
            params["temperature"] = temperature
        params.update(_known_extra(request.extra))
        return params

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """One Messages API call.

        Raises:
            TurnError: ``retryable`` (429, 5xx, timeout, connection), ``model`` (bad
                request, unknown stop_reason, malformed response) or ``non_retryable``
                (authentication, permission, not found).
        """
        from anthropic import AnthropicError

        params = self.build_params(request)
        # Body fields the SDK has no parameter for (it dropped temperature/top_p/top_k)
        # still go on the wire, as extra body fields, for the models that accept them.
        extra_body = {k: v for k, v in params.items() if k not in _SDK_PARAMS}
        try:
            message = await self._client.messages.create(
                **{k: v for k, v in params.items() if k in _SDK_PARAMS}, extra_body=extra_body or None
            )
        except AnthropicError as e:
            raise map_anthropic_error(e) from e
        except Exception as e:  # the SDK let a foreign error through (e.g. a body that is not JSON)
            raise unexpected_error(e, sdk="anthropic") from e
        try:
            return response_from_message(message, requested_model=params["model"])
        except (ValidationError, AttributeError, TypeError) as e:  # a response of an unexpected shape
            raise unexpected_error(e, sdk="anthropic") from e


def _text_of(message: ProviderMessage) -> str:
    return "\n".join(p.text for p in message.content if isinstance(p, TextPart))


def _part(part: TextPart | ToolUsePart | ToolResultPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ToolUsePart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
    if isinstance(part, ToolResultPart):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": part.tool_use_id,
            "content": part.content,
        }
        if part.is_error:
            block["is_error"] = True
        return block
    if part.source_type == "base64":
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    else:
        source = {"type": "url", "url": part.data}
    return {"type": "image", "source": source}


def _messages(messages: list[ProviderMessage]) -> list[dict[str, Any]]:
    """User/assistant messages; consecutive same-role messages merged, tool results first.

    The API requires a user message answering tool calls to START with its
    ``tool_result`` blocks, so they are moved ahead of any text or image (stable order).
    """
    merged: list[tuple[Role, list[Any]]] = []
    for m in messages:
        if m.role is Role.SYSTEM:
            continue
        if merged and merged[-1][0] is m.role:
            merged[-1][1].extend(m.content)
        else:
            merged.append((m.role, list(m.content)))
    out: list[dict[str, Any]] = []
    for role, parts in merged:
        if role is Role.USER:
            parts = [p for p in parts if isinstance(p, ToolResultPart)] + [
                p for p in parts if not isinstance(p, ToolResultPart)
            ]
        out.append({"role": role.value, "content": [_part(p) for p in parts]})
    return out


def _known_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The provider-specific keys of ``request.extra`` this provider forwards.

    ``metadata.user_id`` (a string) becomes the API's ``metadata``; ``stop_sequences``,
    ``top_p``, ``top_k`` and ``tool_choice`` pass through. Everything else (trace ids,
    unknown keys) stays local. ``thinking`` is deliberately not forwarded: thinking blocks
    have no ContentPart, and the API rejects a tool-use continuation without them.
    """
    out: dict[str, Any] = {}
    metadata = extra.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("user_id"), str):
        out["metadata"] = {"user_id": metadata["user_id"]}
    stops = extra.get("stop_sequences")
    if isinstance(stops, list) and all(isinstance(s, str) for s in stops):
        out["stop_sequences"] = stops
    for key in ("top_p", "top_k"):
        value = extra.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value
    if isinstance(extra.get("tool_choice"), Mapping):
        out["tool_choice"] = dict(extra["tool_choice"])
    return out


def response_from_message(message: Message, *, requested_model: str) -> ProviderResponse:
    """Map a Messages API response; raise ``TurnError.model`` for an unknown stop_reason.

    Text and tool_use blocks become parts; thinking and server-tool blocks are dropped
    (debug log); a block type this code does not know is dropped with a warning.
    """
    raw_stop = message.stop_reason
    stop = ANTHROPIC_STOP_REASONS.get(str(raw_stop)) if raw_stop is not None else None
    if stop is None:
        raise TurnError.model(f"anthropic: unknown stop_reason {raw_stop!r} (model {message.model})")
    content: list[TextPart | ToolUsePart] = []
    for block in message.content:
        block_type = getattr(block, "type", None)
        if block_type == "text":
            content.append(TextPart(text=block.text))  # type: ignore[union-attr]
        elif block_type == "tool_use":
            content.append(
                ToolUsePart(id=block.id, name=block.name, input=block.input)  # type: ignore[union-attr]
            )
        elif block_type in IGNORED_BLOCK_TYPES:
            log.debug("anthropic: dropping %s block (no ContentPart for it)", block_type)
        else:
            log.warning("anthropic: dropping content block of unknown type %r", block_type)
    usage = _usage(message)
    model = message.model or requested_model
    stop_detail = None
    details = message.stop_details
    if stop is StopReason.REFUSAL and details is not None:
        stop_detail = details.explanation or (f"category: {details.category}" if details.category else None)
    return ProviderResponse(
        content=content,
        stop_reason=stop,
        usage=usage,
        model=model,
        cost=anthropic_cost(model, usage),
        stop_detail=stop_detail,
    )


def _usage(message: Message) -> TokenUsage:
    u = message.usage
    breakdown = u.cache_creation
    return TokenUsage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_input_tokens,
        cache_creation_tokens=u.cache_creation_input_tokens,
        cache_creation_5m_tokens=breakdown.ephemeral_5m_input_tokens if breakdown is not None else None,
        cache_creation_1h_tokens=breakdown.ephemeral_1h_input_tokens if breakdown is not None else None,
    )

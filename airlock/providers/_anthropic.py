"""The Anthropic Messages API provider, through the official ``anthropic`` SDK (async client).

The SDK is imported when a provider is constructed, never at package import, so the
runner starts fast when another provider is configured.

Server-side compaction (``ProviderSpec.compaction``, the ``compact-2026-01-12`` beta): each
request carries ``context_management: {"edits": [{"type": "compact_20260112", "trigger":
{"type": "input_tokens", "value": N}}]}`` and the beta header. When the API compacts, its
``compaction`` block comes back in the response; it is kept in the history (a
``CompactionPart``) and sent back verbatim (the API then ignores what precedes it). A
``compaction`` stop reason means the model call did not end the turn (the loop goes on). The
usage of every sampling iteration (``usage.iterations``: the compaction's own and the
model's) is summed into the call's tokens and cost; the top-level usage counts only the
model's.

Extended thinking (``ProviderSpec.thinking``): each request carries ``thinking: {"type":
"enabled", "budget_tokens": N}`` (and no ``temperature``/``top_k``, which the API refuses with
it). Thinking blocks have no ContentPart: the provider keeps those of each tool-use answer
and sends them back, verbatim, before its calls (the API refuses a tool-use continuation
without them); a call whose tool use it holds no thinking for (a resumed session) or that
forces a tool call goes without thinking. Thinking tokens are output tokens in the API's
usage, so they are priced at the output rate.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from airlock.spec import ProviderSpec
from airlock.turn import (
    CompactionPart,
    ContentPart,
    ProviderCompaction,
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
from ._pricing import anthropic_cost
from ._tool_names import decode_tool_names, encode_tool_names

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message
    from anthropic.types.beta import BetaMessage

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
    "compaction": StopReason.COMPACTION,
}

#: The beta server-side compaction needs (sent as the ``anthropic-beta`` header).
COMPACTION_BETA = "compact-2026-01-12"
#: The context-management edit that turns it on.
COMPACTION_EDIT = "compact_20260112"

#: Request fields ``messages.create`` takes as keyword arguments (others: ``extra_body``).
_SDK_PARAMS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "metadata",
        "stop_sequences",
        "tool_choice",
        "context_management",
        "thinking",
    }
)
#: Thinking blocks kept per provider (the latest tool-use answers'), to send back.
MAX_KEPT_THINKING = 256

#: Response blocks of extended thinking (sent back verbatim before their tool calls).
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
#: The smallest thinking budget the API accepts.
MIN_THINKING_BUDGET = 1024

#: ``tool_choice`` by its portable (OpenAI) name -> the Messages API's ``type``.
_TOOL_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
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
        from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient  # lazy: the SDK is heavy to import

        self.spec = spec
        self.model = spec.model or DEFAULT_ANTHROPIC_MODEL
        self._client: AsyncAnthropic = AsyncAnthropic(
            api_key=resolve_api_key(spec.api_key_env),
            base_url=spec.base_url,
            timeout=spec.timeout_s,
            max_retries=spec.max_retries,
            http_client=DefaultAsyncHttpxClient(event_hooks=EVENT_HOOKS),
        )
        #: With thinking on: the thinking blocks of each tool-use answer, by its first
        #: tool_use id (the API wants them back before those calls in the next request).
        self._thinking: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    async def aclose(self) -> None:
        """Close the SDK's HTTP connections."""
        await self._client.close()

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        """The Messages API request body for ``request`` (without transport options)."""
        system_parts = [request.system] if request.system else []
        system_parts += [_text_of(m) for m in request.messages if m.role is Role.SYSTEM]
        compaction = self.spec.compaction
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens or self.spec.max_tokens,
            "messages": _messages(request.messages, compaction=compaction is not None, thinking=self._kept),
        }
        thinking = self._thinking_param(params)
        if compaction is not None:
            trigger = {"type": "input_tokens", "value": compaction.trigger_tokens}
            params["context_management"] = {"edits": [{"type": COMPACTION_EDIT, "trigger": trigger}]}
        if system_parts:
            params["system"] = "\n\n".join(p for p in system_parts if p)
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        temperature = request.temperature if request.temperature is not None else self.spec.temperature
        if temperature is not None and thinking is None:
            params["temperature"] = temperature
        params.update(_known_extra(request.extra))
        if params.get("tool_choice", {}).get("type", "auto") not in ("auto", "none"):
            thinking = None  # the API forces no tool call while thinking
        if thinking is not None:
            params["thinking"] = thinking
            params.pop("top_k", None)  # not allowed with thinking
        return params

    async def _send(
        self, known: dict[str, Any], extra_body: dict[str, Any], on_text: TextSink | None
    ) -> Message | BetaMessage:
        """The API's message: created at once, or streamed with its text to ``on_text``."""
        kwargs: dict[str, Any] = {**known, "extra_body": extra_body or None}
        api: Any = self._client.messages
        if "context_management" in known:  # server-side compaction: the beta endpoint
            api, kwargs["betas"] = self._client.beta.messages, [COMPACTION_BETA]
        if on_text is None:
            created: Message | BetaMessage = await api.create(**kwargs)
            return created
        async with api.stream(**kwargs) as stream:
            async for event in stream:
                if event.type == "text" and event.text:
                    await on_text(event.text)
            final: Message | BetaMessage = await stream.get_final_message()
            return final

    def _thinking_param(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The request's ``thinking`` (None: off, or an ongoing tool use whose thinking blocks
        this provider does not hold, e.g. after a resume: the API refuses it with thinking)."""
        spec = self.spec.thinking
        if spec is None:
            return None
        budget = min(spec.budget_tokens, params["max_tokens"] - 1)
        last = params["messages"][-1] if params["messages"] else None
        if budget < MIN_THINKING_BUDGET:
            return None
        if last is not None and last["role"] == "user" and len(params["messages"]) > 1:
            answer = params["messages"][-2]["content"]
            if any(b["type"] == "tool_use" for b in answer) and answer[0]["type"] not in THINKING_BLOCKS:
                log.info("anthropic: thinking off for this call (its tool calls' thinking is not held)")
                return None
        return {"type": "enabled", "budget_tokens": budget}

    def _kept(self, tool_use_ids: list[str]) -> list[dict[str, Any]]:
        """The thinking blocks of the answer that made these tool calls (or none)."""
        for tool_use_id in tool_use_ids:
            if tool_use_id in self._thinking:
                return self._thinking[tool_use_id]
        return []

    def _keep(self, message: Message | BetaMessage, response: ProviderResponse) -> None:
        """Keep a tool-use answer's thinking blocks for the next request."""
        calls = response.tool_uses()
        if self.spec.thinking is None or not calls:
            return
        blocks = [b.to_dict(mode="json") for b in message.content if b.type in THINKING_BLOCKS]
        if blocks:
            self._thinking[calls[0].id] = blocks
            while len(self._thinking) > MAX_KEPT_THINKING:
                self._thinking.popitem(last=False)

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """One Messages API call.

        Raises:
            TurnError: as :meth:`complete_stream`.
        """
        return await self._call(request, None)

    async def complete_stream(self, request: ProviderRequest, on_text: TextSink) -> ProviderResponse:
        """One Messages API call, streamed (the SDK's ``messages.stream``): ``on_text`` gets
        each text delta as it arrives; the response is the final message's.

        Raises:
            TurnError: ``retryable`` (429, 5xx, timeout, connection), ``model`` (bad
                request, unknown stop_reason, malformed response) or ``non_retryable``
                (authentication, permission, not found).
        """
        return await self._call(request, on_text)

    async def _call(self, request: ProviderRequest, on_text: TextSink | None) -> ProviderResponse:
        from anthropic import AnthropicError

        request, names = encode_tool_names(request)
        params = self.build_params(request)
        # Body fields the SDK has no parameter for (it dropped temperature/top_p/top_k)
        # still go on the wire, as extra body fields, for the models that accept them.
        extra_body = {k: v for k, v in params.items() if k not in _SDK_PARAMS}
        known = {k: v for k, v in params.items() if k in _SDK_PARAMS}
        message: Message | BetaMessage
        try:
            with attempts() as noted:
                message = await self._send(known, extra_body, on_text)
        except AnthropicError as e:
            raise map_anthropic_error(e) from e
        except Exception as e:  # the SDK let a foreign error through (e.g. a body that is not JSON)
            raise unexpected_error(e, sdk="anthropic") from e
        try:
            response = response_from_message(message, requested_model=params["model"])
            self._keep(message, response)
        except (ValidationError, AttributeError, TypeError) as e:  # a response of an unexpected shape
            raise unexpected_error(e, sdk="anthropic") from e
        failed = retries(noted)
        response = decode_tool_names(response, names)
        return response.model_copy(update={"retries": failed}) if failed else response


def _text_of(message: ProviderMessage) -> str:
    return "\n".join(p.text for p in message.content if isinstance(p, TextPart))


def _part(part: ContentPart, *, compaction: bool) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, CompactionPart):
        if compaction:
            return dict(part.block)  # verbatim, as the API returned it
        return {"type": "text", "text": part.as_text()}
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


def _messages(
    messages: list[ProviderMessage],
    *,
    compaction: bool,
    thinking: Callable[[list[str]], list[dict[str, Any]]] = lambda ids: [],
) -> list[dict[str, Any]]:
    """User/assistant messages; consecutive same-role messages merged, tool results first.

    An assistant message with tool calls starts with the thinking blocks ``thinking`` holds
    for their ids (the API wants them back, unchanged, while thinking is on).
    The API requires a user message answering tool calls to START with its
    ``tool_result`` blocks, so they are moved ahead of any text or image (stable order).
    Compaction parts go back verbatim when ``compaction`` is on, else as their summary's text
    (without the beta, the API takes no compaction block).
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
        blocks = [_part(p, compaction=compaction) for p in parts]
        if role is Role.ASSISTANT:
            blocks = thinking([p.id for p in parts if isinstance(p, ToolUsePart)]) + blocks
        out.append({"role": role.value, "content": blocks})
    return out


def _known_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The provider-specific keys of ``request.extra`` this provider forwards.

    ``metadata.user_id`` (a string) becomes the API's ``metadata``; ``stop_sequences``,
    ``top_p``, ``top_k`` and ``tool_choice`` pass through (``tool_choice`` also by its portable
    names: ``required`` is the API's ``any``); ``parallel_tool_calls: false`` becomes the
    ``tool_choice``'s ``disable_parallel_tool_use``. Everything else (trace ids,
    unknown keys) stays local. ``thinking`` is not forwarded from here: it is the spec's
    ``thinking`` option (the provider then keeps the thinking blocks a tool-use continuation
    needs).
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
    elif extra.get("tool_choice") in _TOOL_CHOICES:  # the portable names (OpenAI's)
        out["tool_choice"] = {"type": _TOOL_CHOICES[str(extra["tool_choice"])]}
    if extra.get("parallel_tool_calls") is False:
        choice = out.get("tool_choice", {"type": "auto"})
        if choice.get("type") != "none":
            out["tool_choice"] = {**choice, "disable_parallel_tool_use": True}
    return out


def response_from_message(message: Message | BetaMessage, *, requested_model: str) -> ProviderResponse:
    """Map a Messages API response; raise ``TurnError.model`` for an unknown stop_reason.

    Text, tool_use and compaction blocks become parts; thinking and server-tool blocks are
    dropped (debug log); a block type this code does not know is dropped with a warning.
    With ``usage.iterations`` (server-side compaction), tokens and cost are the sum of every
    iteration's, each priced on its own.
    """
    raw_stop = message.stop_reason
    stop = ANTHROPIC_STOP_REASONS.get(str(raw_stop)) if raw_stop is not None else None
    if stop is None:
        raise TurnError.model(f"anthropic: unknown stop_reason {raw_stop!r} (model {message.model})")
    content: list[ContentPart] = []
    for block in message.content:
        block_type = getattr(block, "type", None)
        if block_type == "text":
            content.append(TextPart(text=block.text))  # type: ignore[union-attr]
        elif block_type == "tool_use":
            content.append(
                ToolUsePart(id=block.id, name=block.name, input=block.input)  # type: ignore[union-attr]
            )
        elif block_type == "compaction":
            raw: dict[str, Any] = block.to_dict(mode="json")  # what the API sent, to send back as is
            summary = raw.get("content")
            content.append(CompactionPart(summary=summary if isinstance(summary, str) else None, block=raw))
        elif block_type in IGNORED_BLOCK_TYPES:
            log.debug("anthropic: dropping %s block (no ContentPart for it)", block_type)
        else:
            log.warning("anthropic: dropping content block of unknown type %r", block_type)
    model = message.model or requested_model
    iterations = getattr(message.usage, "iterations", None) or []
    if iterations:
        per_iteration = [_usage(it) for it in iterations]
        usage = _sum(per_iteration)
        costs = [anthropic_cost(model, u) for u in per_iteration]
        cost = None if any(c is None for c in costs) else sum((c for c in costs if c is not None), Decimal(0))
    else:
        usage = _usage(message.usage)
        cost = anthropic_cost(model, usage)
    compacted = any(isinstance(p, CompactionPart) for p in content)
    stop_detail = None
    details = message.stop_details
    if stop is StopReason.REFUSAL and details is not None:
        stop_detail = details.explanation or (f"category: {details.category}" if details.category else None)
    return ProviderResponse(
        content=content,
        stop_reason=stop,
        usage=usage,
        model=model,
        cost=cost,
        stop_detail=stop_detail,
        truncated=stop is StopReason.MAX_TOKENS,
        compaction=_compaction_report(iterations) if compacted or stop is StopReason.COMPACTION else None,
    )


def _usage(u: Any) -> TokenUsage:
    """A usage object's counters (a message's ``usage``, or one of its ``iterations``)."""
    breakdown = getattr(u, "cache_creation", None)
    return TokenUsage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_input_tokens,
        cache_creation_tokens=u.cache_creation_input_tokens,
        cache_creation_5m_tokens=breakdown.ephemeral_5m_input_tokens if breakdown is not None else None,
        cache_creation_1h_tokens=breakdown.ephemeral_1h_input_tokens if breakdown is not None else None,
    )


def _sum(usages: list[TokenUsage]) -> TokenUsage:
    """Counters added up (an optional counter stays None only when no usage reports it)."""

    def total(name: str) -> int | None:
        values = [getattr(u, name) for u in usages if getattr(u, name) is not None]
        return sum(values) if values else None

    return TokenUsage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_read_tokens=total("cache_read_tokens"),
        cache_creation_tokens=total("cache_creation_tokens"),
        cache_creation_5m_tokens=total("cache_creation_5m_tokens"),
        cache_creation_1h_tokens=total("cache_creation_1h_tokens"),
    )


def _context_tokens(it: Any, *, with_output: bool) -> int:
    """The size of the context an iteration read (and, ``with_output``, then wrote)."""
    size = (
        int(it.input_tokens) + int(it.cache_read_input_tokens or 0) + int(it.cache_creation_input_tokens or 0)
    )
    return size + int(it.output_tokens) if with_output else size


def _compaction_report(iterations: list[Any]) -> ProviderCompaction:
    """The context's size around the first compaction iteration: after the model iteration
    before it (None when the compaction came first: the request's own context), and as the
    model iteration after it read it. A compaction iteration's own usage is its summarizing
    call's, not the context's size, so it says neither."""
    kinds = [getattr(it, "type", None) for it in iterations]
    if "compaction" not in kinds:
        return ProviderCompaction()
    at = kinds.index("compaction")
    before = iterations[at - 1] if at > 0 and kinds[at - 1] == "message" else None
    after = iterations[at + 1] if at + 1 < len(iterations) and kinds[at + 1] == "message" else None
    return ProviderCompaction(
        tokens_before=_context_tokens(before, with_output=True) if before is not None else None,
        tokens_after=_context_tokens(after, with_output=False) if after is not None else None,
    )

"""Live calls to the real APIs; run only when their credentials are configured."""

from __future__ import annotations

import os

import pytest

from airlock.providers import create_provider
from airlock.spec import ProviderSpec
from airlock.turn import StopReason

from .provider_helpers import CALC, request, user

pytestmark = pytest.mark.live


@pytest.mark.skipif(
    not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY is not set (live Anthropic test)"
)
async def test_anthropic_live() -> None:
    provider = create_provider(ProviderSpec(kind="anthropic", api_key_env="ANTHROPIC_API_KEY", max_tokens=64))
    response = await provider.complete(
        request(
            user("Use the calc tool to compute 6*7."), tools=[CALC], system="Always use tools for arithmetic."
        )
    )
    assert response.stop_reason in (StopReason.TOOL_USE, StopReason.END_TURN)
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.cost is not None and response.cost > 0


@pytest.mark.skipif(
    not (os.environ.get("OPENAI_API_KEY") and os.environ.get("OPENAI_BASE_URL")),
    reason="OPENAI_API_KEY and OPENAI_BASE_URL are not both set (live OpenAI-compatible test)",
)
async def test_openai_compat_live() -> None:
    provider = create_provider(
        ProviderSpec(
            kind="openai_compat",
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            base_url=os.environ["OPENAI_BASE_URL"],
            api_key_env="OPENAI_API_KEY",
            max_tokens=64,
        )
    )
    response = await provider.complete(request(user("Reply with the single word: pong")))
    assert response.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert response.text().strip()

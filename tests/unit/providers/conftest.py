"""Fixtures for the provider tests: wire-level fake servers on 127.0.0.1 and providers
built by ``create_provider`` pointing at them (real SDKs, SDK retries off)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from airlock.providers import AnthropicProvider, OpenAICompatProvider, create_provider
from airlock.spec import ProviderSpec
from airlock.testing._anthropic_server import FakeAnthropicServer
from airlock.testing._openai_server import FakeOpenAIServer


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def anthropic(anthropic_server: FakeAnthropicServer) -> AsyncIterator[AnthropicProvider]:
    provider = create_provider(
        ProviderSpec(kind="anthropic", base_url=anthropic_server.base_url, max_retries=0)
    )
    assert isinstance(provider, AnthropicProvider)
    yield provider
    await provider.aclose()


@pytest.fixture
async def openai_compat(openai_server: FakeOpenAIServer) -> AsyncIterator[OpenAICompatProvider]:
    provider = create_provider(
        ProviderSpec(
            kind="openai_compat", model="local-model", base_url=openai_server.base_url, max_retries=0
        )
    )
    assert isinstance(provider, OpenAICompatProvider)
    yield provider
    await provider.aclose()

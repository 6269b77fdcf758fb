"""airlock.testing: doubles for testing agents and environments without a cloud account.

Every server here speaks the real protocol on the wire (the official SDKs talk HTTP to them);
:class:`FakeProvider` is an in-memory ``Provider`` for loop-level tests. For a deterministic
provider in production use (demos, replays) see the ``scripted`` provider instead.
"""

from ._anthropic_server import (
    FakeAnthropicServer,
    anthropic_error,
    anthropic_message,
    presented_api_key,
    text_block,
    tool_use_block,
)
from ._echo import EchoTurn
from ._fake_http import FakeHTTPServer, FakeResponse, RecordedRequest
from ._fake_provider import FakeProvider, text_response, tool_response, usage_of
from ._local_environment import LocalEnvironment
from ._openai_server import FakeOpenAIServer, chat_completion, openai_error, tool_call
from ._orchestrator import LocalOrchestrator

__all__ = [
    "EchoTurn",
    "FakeAnthropicServer",
    "FakeHTTPServer",
    "FakeOpenAIServer",
    "FakeProvider",
    "FakeResponse",
    "LocalEnvironment",
    "LocalOrchestrator",
    "RecordedRequest",
    "anthropic_error",
    "anthropic_message",
    "chat_completion",
    "openai_error",
    "presented_api_key",
    "text_block",
    "text_response",
    "tool_call",
    "tool_response",
    "tool_use_block",
    "usage_of",
]

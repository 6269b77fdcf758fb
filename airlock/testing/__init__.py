"""airlock.testing: doubles for testing agents and environments without a cloud account.

Every server here speaks the real protocol on the wire (the official SDKs talk HTTP to them);
:class:`FakeProvider` is an in-memory ``Provider`` for loop-level tests. For a deterministic
provider in production use (demos, replays) see the ``scripted`` provider instead; the
scripted-agent builders here (:func:`scripted_agent`, :func:`bash_agent`,
:func:`calculator_agent`, the ``*_step`` functions) write its scripts.
:class:`KubeApiStandIn` is a stand-in Kubernetes API server for the official client, its pods
run by a :class:`PodRuntime` (:class:`ScriptedPods` shows what a :class:`PodScript` says;
:class:`DockerPods` runs the pods' containers on the local Docker engine).
"""

from ._agents import (
    bash_agent,
    calculator_agent,
    calculator_script,
    script_yaml,
    scripted_agent,
    text_step,
    tool_step,
    tools_step,
)
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
from ._kube_apiserver import KubeApiStandIn
from ._kube_docker import DockerPods
from ._kube_pods import PodRuntime, PodScript, ScriptedPods
from ._local_environment import LocalEnvironment
from ._openai_server import FakeOpenAIServer, chat_completion, openai_error, tool_call
from ._orchestrator import LocalOrchestrator

__all__ = [
    "DockerPods",
    "EchoTurn",
    "FakeAnthropicServer",
    "FakeHTTPServer",
    "FakeOpenAIServer",
    "FakeProvider",
    "FakeResponse",
    "KubeApiStandIn",
    "LocalEnvironment",
    "LocalOrchestrator",
    "PodRuntime",
    "PodScript",
    "RecordedRequest",
    "ScriptedPods",
    "anthropic_error",
    "anthropic_message",
    "bash_agent",
    "calculator_agent",
    "calculator_script",
    "chat_completion",
    "openai_error",
    "presented_api_key",
    "script_yaml",
    "scripted_agent",
    "text_block",
    "text_response",
    "text_step",
    "tool_call",
    "tool_response",
    "tool_step",
    "tool_use_block",
    "tools_step",
    "usage_of",
]

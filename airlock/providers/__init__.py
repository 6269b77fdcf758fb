"""Model providers behind the ``airlock.turn.Provider`` protocol.

- ``anthropic``: the Anthropic Messages API (official SDK), priced from a dated table.
- ``openai_compat``: any OpenAI-compatible chat-completions server (official SDK).
- ``scripted``: plays a recorded conversation offline; :class:`RecordingProvider` records one.
- ``command``: no model; runs each message as one ``bash`` call (probes, debugging).

Importing this package never imports a provider SDK; each is loaded when its provider
is built.
"""

from ._anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicProvider, map_anthropic_error
from ._command import CommandProvider
from ._common import PLACEHOLDER_API_KEY
from ._factory import create_provider
from ._openai_compat import OpenAICompatProvider, map_openai_error
from ._pricing import ANTHROPIC_PRICES, PRICES_AS_OF, ModelPrice, Rates, anthropic_cost, price_for
from ._scripted import (
    SCRIPTED_MODEL,
    RecordingProvider,
    Script,
    ScriptedProvider,
    ScriptStep,
    StepMatch,
    load_script,
    request_signature,
)

__all__ = [
    "ANTHROPIC_PRICES",
    "DEFAULT_ANTHROPIC_MODEL",
    "PLACEHOLDER_API_KEY",
    "PRICES_AS_OF",
    "SCRIPTED_MODEL",
    "AnthropicProvider",
    "CommandProvider",
    "ModelPrice",
    "OpenAICompatProvider",
    "Rates",
    "RecordingProvider",
    "Script",
    "ScriptStep",
    "ScriptedProvider",
    "StepMatch",
    "anthropic_cost",
    "create_provider",
    "load_script",
    "map_anthropic_error",
    "map_openai_error",
    "price_for",
    "request_signature",
]

"""Build a provider from its spec."""

from __future__ import annotations

import json
from pathlib import Path

from airlock.errors import SpecError
from airlock.spec import PROVIDER_KINDS, ProviderSpec
from airlock.turn import Provider


def create_provider(spec: ProviderSpec) -> Provider:
    """The provider ``spec`` describes (SDKs are imported only for the kind asked for).

    Raises:
        SpecError: unknown kind (the message lists the valid ones), a scripted spec
            without a script or with an invalid one (``script`` is a path, a JSON string,
            a mapping or a list of steps), or a spec the provider refuses
            (missing model, unset api_key_env, …).
    """
    if spec.kind == "anthropic":
        from ._anthropic import AnthropicProvider

        return AnthropicProvider(spec)
    if spec.kind == "openai_compat":
        from ._openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(spec)
    if spec.kind == "scripted":
        from ._scripted import ScriptedProvider

        script = spec.script
        if script is None:
            raise SpecError("scripted provider needs a script (inline steps or a path to a YAML/JSON file)")
        if isinstance(script, str) and script.lstrip().startswith(("[", "{")):
            try:
                inline = json.loads(script)
            except json.JSONDecodeError as e:
                raise SpecError(f"scripted provider: inline script is not valid JSON: {e}") from e
            return ScriptedProvider(inline)
        if isinstance(script, str):
            return ScriptedProvider(Path(script))
        if isinstance(script, list | dict):
            return ScriptedProvider(script)
        raise SpecError(
            f"scripted provider: script must be a path, a mapping or a list, not {type(script).__name__}"
        )
    if spec.kind == "command":
        from ._command import CommandProvider

        return CommandProvider()
    raise SpecError(f"unknown provider kind {spec.kind!r}; valid kinds: {', '.join(PROVIDER_KINDS)}")

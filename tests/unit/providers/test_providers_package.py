"""The package surface: exports, create_provider, and no SDK import at package import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import airlock.providers
from airlock.errors import SpecError
from airlock.providers import create_provider
from airlock.spec import ProviderSpec
from airlock.turn import Provider


def test_import_does_not_load_sdks() -> None:
    code = (
        "import sys, airlock.providers\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai', 'httpx2'))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    assert out.stdout.strip() == "[]", out.stdout


def test_all_matches_public_names() -> None:
    public = {n for n in dir(airlock.providers) if not n.startswith("_")}
    assert set(airlock.providers.__all__) <= public
    assert len(set(airlock.providers.__all__)) == len(airlock.providers.__all__)
    for name in airlock.providers.__all__:
        obj = getattr(airlock.providers, name)
        if callable(obj):  # classes and functions are defined in the package's private modules
            assert obj.__module__.startswith("airlock.providers._"), name


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        (ProviderSpec(kind="anthropic"), "AnthropicProvider"),
        (
            ProviderSpec(kind="openai_compat", model="m", base_url="http://127.0.0.1:9/v1"),
            "OpenAICompatProvider",
        ),
        (ProviderSpec(kind="scripted", script=[]), "ScriptedProvider"),
        (ProviderSpec(kind="command"), "CommandProvider"),
    ],
)
def test_create_provider_kinds(spec: ProviderSpec, cls: str) -> None:
    provider = create_provider(spec)
    assert type(provider).__name__ == cls
    assert isinstance(provider, Provider)
    assert provider.name == spec.kind


def test_unknown_kind_lists_valid_ones() -> None:
    spec = ProviderSpec.model_construct(kind="bedrock")  # bypasses the spec's own validator
    with pytest.raises(
        SpecError,
        match="unknown provider kind 'bedrock'; valid kinds: anthropic, openai_compat, scripted, command",
    ):
        create_provider(spec)

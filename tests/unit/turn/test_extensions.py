"""Extensions by entry point: the test package's provider, hook, context strategy, tool
middleware and turn, found through a temporary dist-info (as an installed package's would be)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock import wire
from airlock.build import build_agent, build_turn, image_turn
from airlock.errors import SpecError
from airlock.sandbox._turn import agent_spec_of
from airlock.spec import AgentSpec, HookSpec, ProviderSpec
from airlock.turn import ExtensionTurn, check_extensions, load_extension
from airlock.turn._extensions import registered
from layer0 import EnvError, ExitReason, TurnError, TurnInput
from tests.support.extensions import install_ext_package


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test package importable, its entry points visible to importlib.metadata."""
    install_ext_package(tmp_path, monkeypatch)


def agent(**extra: object) -> AgentSpec:
    data: dict[str, object] = {
        "name": "ext",
        "provider": {
            "kind": "custom",
            "name": "echo-llm",
            "options": {"tool": "calculator", "input": {"expression": "6*7"}, "prefix": "got "},
        },
        "tools": ["calculator"],
        "hooks": [{"custom": "audit"}],
        "context": {"strategy": "custom", "name": "keep-all"},
        "middleware": [{"name": "tagger", "options": {"tag": "t"}}],
    }
    data.update(extra)
    return AgentSpec.model_validate(data)


def test_the_spec_names_extensions_and_they_cross_the_wire() -> None:
    spec = agent(turn={"entry_point": "one-shot", "options": {"tool": "calculator"}})
    assert spec.hooks[0] == HookSpec(name="custom", custom="audit")
    assert spec.extensions() == [
        ("provider", "echo-llm"),
        ("context strategy", "keep-all"),
        ("hook", "audit"),
        ("tool middleware", "tagger"),
        ("turn", "one-shot"),
    ]
    assert wire.spec_from_proto(wire.spec_to_proto(spec)) == spec
    with pytest.raises(ValueError, match="needs the name of its entry point"):
        ProviderSpec(kind="custom")
    with pytest.raises(ValueError, match="belong to a custom provider only"):
        ProviderSpec(kind="scripted", name="echo-llm")
    with pytest.raises(ValueError, match="custom hook names its entry point"):
        HookSpec(name="budget", custom="audit")


def test_entry_points_are_found_by_group_and_an_unknown_name_is_a_clear_error(installed: None) -> None:
    assert set(registered("hook")) >= {"audit"}
    assert callable(load_extension("turn", "one-shot", agent="ext"))
    with pytest.raises(SpecError) as e:
        load_extension("hook", "nosuch", agent="ext")
    assert "agent 'ext': hook 'nosuch': not registered in the sandbox image" in str(e.value)
    assert "entry-point group airlock.hooks holds: audit" in str(e.value)


def test_every_unregistered_extension_fails_the_build_before_the_turn_starts(installed: None) -> None:
    spec = agent(hooks=[{"custom": "nosuch"}], middleware=[{"name": "gone"}])
    assert len(check_extensions(spec)) == 2
    with pytest.raises(SpecError) as e:
        build_turn(spec)
    lines = str(e.value).splitlines()
    assert lines[0].startswith("agent 'ext': hook 'nosuch': not registered")
    assert lines[1].startswith("agent 'ext': tool middleware 'gone': not registered")


async def test_a_neuron_turn_runs_the_custom_provider_hook_context_and_middleware(installed: None) -> None:
    turn = build_turn(agent())
    assert type(turn.context).__name__ == "KeepAll"
    output = await turn.execute(TurnInput.new("what is 6*7?"))
    assert output.exit_reason == ExitReason.complete()
    assert output.message.as_text() == "got [t] 42"


async def test_a_middleware_refuses_a_call_before_the_tool_runs(installed: None) -> None:
    turn = build_turn(agent(middleware=[{"name": "tagger", "options": {"deny": ["calculator"]}}]))
    output = await turn.execute(TurnInput.new("what is 6*7?"))
    assert (
        output.message.as_text() == "got permission_denied: refused by tool middleware: calculator is denied"
    )


async def test_a_custom_turn_is_built_from_its_entry_point_with_the_spec_parts(installed: None) -> None:
    spec = agent(turn={"entry_point": "one-shot", "options": {"input": {"expression": "2+3"}}})
    turn = build_agent(spec)
    assert isinstance(turn, ExtensionTurn) and turn.spec == spec
    output = await turn.execute(TurnInput.new("hello"))
    assert output.message.as_text() == "got hello | [t] 5"
    with pytest.raises(SpecError, match="build it with build_custom_turn"):
        build_turn(spec)


async def test_a_custom_turn_crosses_into_a_sandbox_by_its_spec_only() -> None:
    spec = agent(turn={"entry_point": "one-shot"})
    stand_in = image_turn(spec)
    assert agent_spec_of(stand_in) is spec  # the sandbox builds it from the image's entry point
    with pytest.raises(TurnError, match="runs only in a sandbox whose image registers it"):
        await stand_in.execute(TurnInput.new("hi"))

    class HostTurn:  # a Turn class of the host's: never shipped into a sandbox
        async def execute(self, input: TurnInput) -> None: ...

    with pytest.raises(EnvError, match=r"entry point of airlock\.turns"):
        agent_spec_of(HostTurn())  # type: ignore[arg-type]

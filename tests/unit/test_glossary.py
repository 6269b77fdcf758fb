"""docs/glossary.md holds the vocabulary, and the code keeps to it: one name per meaning."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"

TERMS = (
    "agent",
    "agent spec",
    "running agent",
    "turn",
    "session",
    "step",
    "effect",
    "event sink",
    "sandbox backend",
    "sandbox instance",
    "plan",
    "policy",
    "weave",
    "knot",
    "braid",
    "causal cone",
    "fixed point",
    "layer0",
    "NeuronTurn",
    "job",
    "execution",
    "checkpoint",
    "approval",
    "principal",
    "role",
    "tenant",
    "quota",
    "store",
    "replica",
    "claim",
    "lease",
    "fencing token",
    "effect ledger",
)
#: The event sinks, one per meaning: name -> the package that defines it.
EVENT_SINKS = {
    "TurnEventSink": "airlock.turn",
    "SandboxEventSink": "airlock.sandbox",
    "ProxyEventSink": "airlock.proxy",
}


def _defined_terms() -> list[str]:
    return re.findall(r"^### (.+)$", GLOSSARY.read_text(encoding="utf-8"), re.M)


def _top_level_names() -> dict[str, list[str]]:
    """Every class, function, alias or constant defined at module level in airlock/: name -> files."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "airlock").rglob("*.py")):
        if "_proto" in path.parts:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names: list[str] = []
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_term_is_defined_once() -> None:
    terms = _defined_terms()
    assert sorted(set(TERMS) - set(terms)) == []
    assert len(terms) == len(set(terms)), "a term is defined twice"


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module, or attributes reached from the longest importable one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(value, attr):
                return False
            value = getattr(value, attr)
        return True
    return False


def test_every_qualified_name_the_glossary_gives_exists() -> None:
    text = GLOSSARY.read_text(encoding="utf-8")
    names = set(re.findall(r"`((?:airlock|layer0)(?:\.\w+)+)`", text)) - {"airlock.yaml"}
    assert len(names) > 20
    assert sorted(n for n in names if not _resolves(n)) == []


def test_one_event_sink_name_per_meaning() -> None:
    sinks = {name: files for name, files in _top_level_names().items() if name.endswith("EventSink")}
    assert sorted(sinks) == sorted(EVENT_SINKS)
    for name, package in EVENT_SINKS.items():
        assert len(sinks[name]) == 1, f"{name} is defined in {sinks[name]}"
        assert hasattr(importlib.import_module(package), name)


@pytest.mark.parametrize("old", ["EventSink", "TurnSession", "TurnSessionError", "inline_script"])
def test_retired_names_are_gone(old: str) -> None:
    assert _top_level_names().get(old, []) == []


def test_each_rewrite_of_the_agent_lives_in_the_running_agent_module() -> None:
    assert _top_level_names()["sidecar_agent"] == ["airlock/sandbox/_running.py"]


def test_session_means_the_conversation_only() -> None:
    from airlock.sandbox import SandboxRequest

    assert "session" not in SandboxRequest.model_fields  # the turn's controls: ``handle``
    assert "handle" in SandboxRequest.model_fields
    classes = [n for n in _top_level_names() if "Session" in n and n[0].isupper() and not n.isupper()]
    assert classes == ["SessionState"]  # the conversation's snapshot


def test_policy_holds_what_a_sandbox_may_do_and_behaviour_the_rest() -> None:
    policy = {p.stem for p in (ROOT / "airlock" / "policy").glob("*.py")}
    assert not policy & {"approval", "durability", "input_files"}
    behaviour = importlib.import_module("airlock.behaviour")
    for name in ("ApprovalPolicy", "ApprovalDecision", "DurabilityPolicy", "InputFilesPolicy"):
        assert hasattr(behaviour, name)


def test_an_agent_config_does_not_repeat_its_spec_defaults() -> None:
    from airlock.config import AgentConfig

    assert "defaults" not in AgentConfig.model_fields

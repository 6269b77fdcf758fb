"""Decimal money, typed ids, Content helpers, errors, and layer0's import footprint."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from layer0 import (
    AgentId,
    Base64Source,
    BudgetDecision,
    Content,
    CustomBlock,
    Delegate,
    ImageBlock,
    OrchError,
    ScopeId,
    SessionId,
    StateError,
    TextBlock,
    ToolUseBlock,
    TurnError,
    TurnInput,
    TurnMetadata,
    WorkflowId,
    decimal_to_str,
)

# -- Decimal --------------------------------------------------------------------------------


def test_decimal_arithmetic_is_exact() -> None:
    assert Decimal("0.001") * 10000 == Decimal("10.00")
    assert sum([Decimal("0.001")] * 10000, Decimal(0)) == Decimal("10")
    assert 0.001 * 10000 == 10.0 and sum([0.001] * 10000) != 10.0  # why floats are never used


def test_decimal_survives_turn_metadata_json() -> None:
    per_call = Decimal("0.001")
    meta = TurnMetadata.empty().model_copy(update={"cost": per_call * 10000})
    text = meta.model_dump_json()
    assert json.loads(text)["cost"] == "10.000"
    back = TurnMetadata.model_validate_json(text)
    assert back.cost == Decimal("10.00") and isinstance(back.cost, Decimal)
    assert decimal_to_str(back.cost) == "10.000"  # the scale is kept


def test_decimal_scale_kept_and_numbers_rejected() -> None:
    ta = TypeAdapter(TurnMetadata)
    base = json.loads(TurnMetadata.empty().model_dump_json())
    for text in ["1.50", "0.0000", "-0.25", "100", "0.012300"]:
        assert ta.dump_python(ta.validate_python(base | {"cost": text}), mode="json")["cost"] == text
    with pytest.raises(ValidationError, match="string"):
        ta.validate_python(base | {"cost": 0.5})
    with pytest.raises(ValidationError):
        ta.validate_python(base | {"cost": "NaN"})
    assert BudgetDecision.request_increase(Decimal("5.00")).amount == Decimal("5.00")


# -- typed ids ------------------------------------------------------------------------------


def test_typed_id_conversions() -> None:
    a = AgentId("agent-1")
    assert str(a) == "agent-1" and a.as_str() == "agent-1" and a.root == "agent-1"
    assert repr(a) == "AgentId('agent-1')"
    assert AgentId(str(SessionId("x"))) == AgentId("x")
    assert TypeAdapter(AgentId).dump_json(a) == b'"agent-1"'
    assert TypeAdapter(AgentId).validate_json('"agent-1"') == a
    assert hash(a) == hash(AgentId("agent-1"))
    assert {a: 1}[AgentId("agent-1")] == 1


def test_typed_ids_are_not_interchangeable() -> None:
    assert AgentId("a") != SessionId("a")
    assert SessionId("a") != WorkflowId("a") != ScopeId("a")
    assert AgentId("a") != "a"
    with pytest.raises(ValidationError):
        Delegate(agent=SessionId("a"), input=TurnInput.new("x"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        TurnInput(message=Content("x"), trigger="user", session=AgentId("a"))  # type: ignore[arg-type]
    # From the wire a bare string is the id.
    assert Delegate.model_validate(
        {"agent": "a", "input": {"message": "x", "trigger": "user"}}
    ).agent == AgentId("a")


def test_typed_ids_are_frozen() -> None:
    a = AgentId("a")
    with pytest.raises(ValidationError):
        a.root = "b"


# -- Content --------------------------------------------------------------------------------


def test_content_text_helpers() -> None:
    c = Content.text("hello")
    assert c == Content("hello") and c.is_text
    assert c.as_text() == "hello"
    assert c.as_blocks() == [TextBlock(text="hello")]
    assert Content("").as_blocks() == []
    assert c.model_dump_json() == '"hello"'


def test_content_blocks_helpers() -> None:
    blocks = [
        ImageBlock(source=Base64Source(data="x"), media_type="image/png"),
        TextBlock(text="first"),
        ToolUseBlock(id="1", name="t", input=None),
        CustomBlock(content_type="c", data={"b": 1, "a": 2}),
        TextBlock(text="second"),
    ]
    c = Content.blocks(blocks)
    assert not c.is_text
    assert c.as_text() == "first"
    assert c.as_blocks() == blocks
    assert c.joined_text() == 'first\n{"a": 2, "b": 1}\nsecond'
    assert Content([ImageBlock(source=Base64Source(data="x"), media_type="m")]).as_text() is None
    assert Content([]).as_text() is None
    assert json.loads(c.model_dump_json())[1] == {"type": "text", "text": "first"}


def test_content_rejects_non_wire_shapes() -> None:
    with pytest.raises(ValidationError):
        Content.model_validate({"type": "text", "text": "a"})
    with pytest.raises(ValidationError):
        Content.model_validate(None)


# -- errors ---------------------------------------------------------------------------------


def test_error_constructors_and_chaining() -> None:
    turn_err = TurnError.tool("bash", "exit 1")
    assert str(turn_err) == "tool error in bash: exit 1" and not turn_err.is_retryable
    orch_err = OrchError.from_turn_error(turn_err)
    assert orch_err.kind == "turn_error" and orch_err.__cause__ is turn_err
    assert str(OrchError.agent_not_found("x")) == "agent not found: x"
    assert StateError.serialization("bad").kind == "serialization"
    assert repr(StateError.write_failed("w")) == "StateError.write_failed('w')"


def test_models_are_frozen() -> None:
    with pytest.raises(ValidationError):
        TurnInput.new("x").session = SessionId("s")  # type: ignore[misc]
    assert issubclass(TurnInput, BaseModel)


# -- import footprint -----------------------------------------------------------------------

ALLOWED_THIRD_PARTY = {
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
}


def test_import_layer0_pulls_in_only_pydantic() -> None:
    script = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import layer0\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=_repo_root()
    ).stdout
    loaded = {name.split(".")[0] for name in json.loads(out)}
    stdlib = set(sys.stdlib_module_names)
    third_party = {m for m in loaded if m not in stdlib and not m.startswith("_") and m != "layer0"}
    assert third_party <= ALLOWED_THIRD_PARTY, third_party - ALLOWED_THIRD_PARTY
    assert "pydantic" in third_party
    assert "airlock" not in loaded


def _repo_root() -> str:
    import layer0

    return str(__import__("pathlib").Path(layer0.__file__).resolve().parent.parent)

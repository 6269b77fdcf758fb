"""The published JSON Schema of SessionState (issue 35 item 5): what ``ExecuteRequest.resume``
and every ``Checkpoint.state`` carry, so a client in another language need not guess it."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from airlock.spec import ApprovalGate
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import Checkpoint, NeuronTurn, SessionState, tool
from layer0 import TurnInput

from .turn_helpers import Recorder

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = ROOT / "protos" / "schemas" / "session_state.schema.json"


def _generator() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_schemas

    return gen_schemas


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_committed_schema_is_what_the_model_generates() -> None:
    gen = _generator()
    assert SCHEMA_PATH.read_text() == gen.render(gen.session_state_schema()), (
        "protos/schemas/session_state.schema.json is stale: run python scripts/gen_schemas.py"
    )


def test_the_protos_point_at_the_schema() -> None:
    for proto in ("runner/v1/runner.proto", "controller/v1/controller.proto"):
        assert "protos/schemas/session_state.schema.json" in (ROOT / "protos" / "airlock" / proto).read_text()


@tool
async def bump(n: int) -> str:
    """Record n."""
    return f"bumped {n}"


async def _states(approval: ApprovalGate | None = None) -> list[dict[str, Any]]:
    """Every checkpoint state of a turn with two tool steps (as JSON), plus the suspended one."""
    script = [
        tool_response(("a", "bump", {"n": 1}), ("b", "bump", {"n": 2}), text="two", cost=Decimal("0.01")),
        text_response("done", cost=Decimal("0.02")),
    ]
    rec = Recorder()
    session = NeuronTurn(FakeProvider(script), tools=[bump], events=rec, approval=approval).start(
        TurnInput.new("count")
    )
    await session.run()
    states = [e.state for e in rec.events if isinstance(e, Checkpoint)]
    return [*states, session.state.model_dump(mode="json")]


async def test_every_checkpoint_and_a_suspended_state_validate(validator: Draft202012Validator) -> None:
    states = [*await _states(), *await _states(ApprovalGate(tools=["bump"]))]
    assert len(states) > 5
    for state in states:
        errors = [e.message for e in validator.iter_errors(state)]
        assert errors == [], errors


async def test_a_resume_a_client_writes_from_the_schema_is_accepted(validator: Draft202012Validator) -> None:
    """A client approving the suspended calls adds their ids to ``approved``: valid for both."""
    state = (await _states(ApprovalGate(tools=["bump"])))[-1]
    state["approved"] = ["a", "b"]
    assert list(validator.iter_errors(state)) == []
    assert SessionState.model_validate(state).approved == ["a", "b"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"approved": "a"}, "approved"),
        ({"version": 2}, "version"),
        ({"unknown_key": 1}, None),
        ({"iterations": "three"}, "iterations"),
    ],
)
async def test_what_the_schema_refuses_the_model_refuses(
    validator: Draft202012Validator, change: dict[str, Any], field: str | None
) -> None:
    state = {**(await _states())[0], **change}
    assert list(validator.iter_errors(state)), change
    with pytest.raises(ValueError):
        SessionState.model_validate(state)
    if field is not None:
        assert any(field in list(e.path) for e in validator.iter_errors(state))

"""The runner's wire carries what the loop now reports: lifecycle events (every layer0 budget and
compaction event), the ``compaction`` stop reason, and checkpoints holding a provider's
compaction part and a tool's declared effects."""

from __future__ import annotations

from decimal import Decimal

import pytest

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.turn import (
    Checkpoint,
    CompactionPart,
    InferenceFinished,
    LifecycleEvent,
    ProviderMessage,
    Role,
    SessionState,
    TextPart,
    ToolExecution,
)
from layer0 import (
    AgentId,
    BudgetAction,
    BudgetDecision,
    BudgetWarning,
    CompactionComplete,
    Content,
    ContextPressure,
    CostIncurred,
    CustomEffect,
    ImageBlock,
    PreCompactionFlush,
    ProviderManaged,
    Scope,
    TextBlock,
    TurnInput,
    TurnOutput,
    UrlSource,
    WorkflowId,
)

A = AgentId("coder")
#: One of each layer0 lifecycle event, optional fields set and not.
LIFECYCLE = [
    CostIncurred(agent=A, cost=Decimal("0.000120"), cumulative=Decimal("1.50")),
    BudgetWarning(workflow=WorkflowId("wf"), spent=Decimal("0.8"), limit=Decimal("1")),
    BudgetAction(workflow=WorkflowId("wf"), action=BudgetDecision.halt_workflow()),
    BudgetAction(workflow=WorkflowId("wf"), action=BudgetDecision.downgrade_model("big", "small")),
    ContextPressure(agent=A, fill_percent=87.5, tokens_used=87_500, tokens_available=100_000),
    PreCompactionFlush(agent=A, scope=Scope.session("s1")),
    CompactionComplete(agent=A, strategy="Summarization", tokens_freed=40_000),
    ProviderManaged(agent=A, provider="anthropic", tokens_before=160_000, tokens_after=2_000),
    ProviderManaged(
        agent=A, provider="anthropic", tokens_before=1, tokens_after=0, summary=Content.text("we talked")
    ),
]


def round_trip(event: object) -> object:
    message = wire.event_to_proto(event, payload_limit=100)  # type: ignore[arg-type]
    assert message is not None
    return wire.event_from_proto(pb.TurnEvent.FromString(message.SerializeToString()))


@pytest.mark.parametrize("payload", LIFECYCLE, ids=lambda e: e.type)
def test_every_lifecycle_event_round_trips_as_layer0_json(payload: object) -> None:
    event = LifecycleEvent(event=payload, agent="coder")  # type: ignore[arg-type]
    message = wire.event_to_proto(event, payload_limit=10)
    assert message is not None and message.WhichOneof("kind") == "lifecycle"
    # the payload is layer0's own JSON (byte-compatible with the Rust crate), not re-encoded
    assert wire.json_from_proto(message.lifecycle.event) == payload.model_dump(mode="json")  # type: ignore[attr-defined]
    assert round_trip(event) == event


def test_a_lifecycle_payload_that_is_not_a_layer0_event_is_refused() -> None:
    for text, problem in [
        (
            '{"type": "cost_incurred", "agent": "a", "cost": 1, "cumulative": "1"}',
            "lifecycle.cost_incurred.cost: a Decimal must be given as a string",
        ),
        (
            '{"type": "weather_report"}',
            "lifecycle: Input tag 'weather_report' found using 'type' does not match",
        ),
        ("[1, 2]", "lifecycle: Input should be an object"),
    ]:
        message = pb.TurnEvent(lifecycle=pb.LifecycleEvent(event=pb.Json(text=text), agent="a"))
        with pytest.raises(wire.MalformedMessage) as info:
            wire.event_from_proto(message)
        assert str(info.value).startswith(problem)


def test_the_compaction_stop_reason_crosses_the_wire() -> None:
    finished = InferenceFinished(
        iteration=2,
        stop_reason="compaction",
        tokens_in=3,
        tokens_out=4,
        cost=None,
        total_tokens_in=3,
        total_tokens_out=4,
        total_cost=Decimal("0"),
        duration_ms=5,
    )
    assert round_trip(finished) == finished


def test_a_checkpoint_keeps_the_compaction_part_and_the_declared_effects() -> None:
    block = {"type": "compaction", "content": "s", "encrypted_content": "opaque", "signature": "sig"}
    effect = CustomEffect(effect_type="ticket.opened", data={"id": 7})
    state = SessionState(
        input=TurnInput.new("x"),
        started=True,
        messages=[
            ProviderMessage(role=Role.USER, content=[TextPart(text="x")]),
            ProviderMessage(role=Role.ASSISTANT, content=[CompactionPart(summary="s", block=block)]),
        ],
        completed=[
            ToolExecution(
                tool_use_id="t", name="ticket", input={}, output="ok", is_error=False, effects=[effect]
            )
        ],
        budget_warned=[0.5],
        run_logs=2,
    )
    event = state.checkpoint(0)
    back = round_trip(event)
    assert isinstance(back, Checkpoint)
    assert SessionState.from_checkpoint(back) == state


def test_an_output_with_an_image_and_a_custom_effect_crosses_the_wire() -> None:
    image = ImageBlock(source=UrlSource(url="https://example.test/a.png"), media_type="image/png")
    output = TurnOutput.new(Content.blocks([TextBlock(text="chart:"), image])).model_copy(
        update={"effects": [CustomEffect(effect_type="ticket.opened", data={"id": 7})]}
    )
    assert wire.output_from_proto(wire.output_to_proto(output)) == output

"""A turn's output from its state: the final answer, the metadata, and the effects (the run
log's, the tools', and the session history written back)."""

from __future__ import annotations

from airlock.spec import HISTORY_KEY
from layer0 import Content, ExitReason, Log, LogLevel, Scope, TurnMetadata, TurnOutput, WriteMemory

from ._run_log import dropped_line
from ._state import SessionState
from ._types import ImagePart, part_to_block


def metadata(st: SessionState, elapsed_ms: float) -> TurnMetadata:
    """The turn's usage so far."""
    return TurnMetadata(
        tokens_in=st.tokens_in,
        tokens_out=st.tokens_out,
        cost=st.cost,
        turns_used=st.iterations,
        tools_called=list(st.tool_records),
        duration=int(elapsed_ms),
    )


def message(st: SessionState) -> Content:
    """The output message: the final answer's text, and its images when it has any."""
    if any(isinstance(p, ImagePart) for p in st.final_parts):
        return Content.blocks([part_to_block(p) for p in st.final_parts])
    return Content.text(st.final_text)


def build_output(st: SessionState) -> TurnOutput:
    """The output of an ended turn."""
    assert st.exit_reason is not None
    effects = list(st.effects)
    dropped = dropped_line(st)
    if dropped is not None:
        effects.append(dropped)
    if st.input.session is not None and st.started:
        effects.append(
            WriteMemory(
                scope=Scope.session(st.input.session),
                key=HISTORY_KEY,
                value=[m.model_dump(mode="json") for m in st.messages],
            )
        )
    return TurnOutput(
        message=message(st),
        exit_reason=st.exit_reason,
        metadata=metadata(st, st.elapsed_ms),
        effects=effects,
    )


def cancelled_output(st: SessionState, elapsed_ms: float) -> TurnOutput:
    """A cancelled turn's output: ``custom("cancelled")`` with the metadata so far (its only
    effect is a log line; history and tool effects are not declared)."""
    return TurnOutput(
        message=message(st),
        exit_reason=ExitReason.custom("cancelled"),
        metadata=metadata(st, elapsed_ms),
        effects=[Log(level=LogLevel.WARN, message="turn cancelled", data={"turns_used": st.iterations})],
    )

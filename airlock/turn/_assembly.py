"""A turn's opening context: the session's history (or the causal cone in its place), then
the trigger, the memory the agent asked for, and the input message."""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from airlock.spec import HISTORY_KEY
from layer0 import Scope, TurnError

from ._effect_tools import MemoryPlace
from ._events import ContextCompacted
from ._memory_tools import memory_context
from ._step_context import StepContext
from ._trigger import trigger_note
from ._types import ContentPart, ProviderMessage, Role, TextPart, block_to_part

_HISTORY = TypeAdapter(list[ProviderMessage])


async def opening_messages(ctx: StepContext) -> list[ProviderMessage]:
    """The messages the turn's first model call reads.

    Raises:
        layer0.TurnError: ``context_assembly``: unreadable history, memory or cone, or an empty input.
    """
    st = ctx.state
    history = await _history(ctx)
    parts: list[ContentPart] = [block_to_part(b) for b in st.input.message.as_blocks()]
    if not parts:
        raise TurnError.context_assembly("the input message is empty")
    parts = [*await _preamble(ctx), *parts]
    cone = await _project_cone(ctx)
    if cone is not None:  # the causal past replaces the shared history
        context, size, total = cone
        before = len(history) + 1
        history, parts = [], [*context, *parts]
        ratio = 1 - size / total if total else 0.0
        await ctx.emit(
            ContextCompacted(
                strategy="causal_cone",
                messages_before=before,
                messages_after=1,
                cone_size=size,
                cone_total=total,
                compression_ratio=ratio,
            )
        )
    return [*history, ProviderMessage(role=Role.USER, content=parts)]


async def _history(ctx: StepContext) -> list[ProviderMessage]:
    """The session's history (none without a session or a state reader)."""
    session = ctx.state.input.session
    reader = ctx.turn.state
    if session is None or reader is None:
        return []
    try:
        raw = await reader.read(Scope.session(session), HISTORY_KEY)
    except Exception as e:
        raise TurnError.context_assembly(f"cannot read the history of session {session}: {e}") from e
    if raw is None:
        return []
    try:
        return _HISTORY.validate_python(raw)
    except ValidationError as e:
        raise TurnError.context_assembly(
            f"the history of session {session} is unreadable: {e.error_count()} error(s), "
            f"first: {e.errors()[0]['msg']}"
        ) from e


async def _preamble(ctx: StepContext) -> list[TextPart]:
    """What goes before the input message: the trigger stated (unless a person sent it),
    then the memory the agent asked for (``memory.context_keys``), session before global."""
    st = ctx.state
    note_text = trigger_note(st.input)
    parts = [TextPart(text=note_text)] if note_text is not None else []
    try:
        place = MemoryPlace.of(st.input, ctx.turn.name)
        lines = await memory_context(ctx.turn.state, place, ctx.turn.memory_keys)
    except Exception as e:
        raise TurnError.context_assembly(f"cannot read the memory the context starts with: {e}") from e
    parts += [TextPart(text=line) for line in lines]
    return parts


async def _project_cone(ctx: StepContext) -> tuple[list[TextPart], int, int] | None:
    """The causal cone (the context strategy's, if it projects one)."""
    project = getattr(ctx.turn.context, "project", None)
    if project is None:
        return None
    try:
        result: tuple[list[TextPart], int, int] | None = await project(ctx.turn.state)
    except Exception as e:
        raise TurnError.context_assembly(f"cannot read the turn's causal cone: {e}") from e
    return result

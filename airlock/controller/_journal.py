"""JobJournal: one job's turn as the controller follows it, from the runner's typed events.

Each ``checkpoint`` the runner reports is rebuilt into the session's full state (the delta on
the previous one), checked, and kept as the job's latest checkpoint (the state a resumed job
continues from). What changed since the previous checkpoint becomes turn records in the job
tree's weave: a model response (SPEECH, THOUGHT, or SILENCE when it said nothing), each tool
call once its result is known (ACTION). The sandbox is untrusted, so a checkpoint that
changes the turn's input, lowers a counter, or shows a gated call that ran without the
approval the controller granted, fails the job instead of being recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from pydantic import JsonValue, ValidationError

from airlock.errors import AirlockError, shorten
from airlock.spec import TOOL_RISKS, ApprovalGate
from airlock.turn import (
    Checkpoint,
    ProviderMessage,
    Role,
    SessionState,
    TextPart,
    ToolExecution,
    ToolResultPart,
    ToolStarted,
    ToolUsePart,
)
from airlock.weave import RecordType, TurnRecord, content_digest, state_hash
from layer0 import TurnInput

from ._weaving import Weaves

#: Characters of a tool's output (and of an oversized input) kept in its record; the record
#: keeps the digest and size of the whole.
RECORD_TEXT_LIMIT = 4096


class JournalViolation(AirlockError):
    """The sandbox reported something no well-behaved runner sends (the job fails)."""

    kind = "isolation_violation"


def session_hash(state: SessionState, workspace: str = "") -> str:
    """The stable hash of a session's state: its messages, the open step's finished calls,
    and the digest of its workspace's manifest when the job keeps one (a job without
    workspace snapshots hashes as before they existed)."""
    hashed: dict[str, JsonValue] = {
        "messages": [m.model_dump(mode="json") for m in state.messages],
        "completed": [
            {"id": c.tool_use_id, "output": c.output, "is_error": c.is_error} for c in state.completed
        ],
    }
    if workspace:
        hashed["workspace"] = workspace
    return state_hash(hashed)


def _cut(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= RECORD_TEXT_LIMIT else (shorten(text, RECORD_TEXT_LIMIT), True)


def call_content(use: ToolUsePart | None, result: ToolExecution | ToolResultPart) -> JsonValue:
    """A tool call's record content: name, input, the output (cut) with the digest and size of
    the whole, and whether it failed."""
    output = result.output if isinstance(result, ToolExecution) else result.content
    shown, cut = _cut(output)
    content: dict[str, JsonValue] = {
        "tool_use_id": result.tool_use_id,
        "tool": use.name if use is not None else getattr(result, "name", "?"),
        "input": use.input if use is not None else getattr(result, "input", None),
        "output": shown,
        "output_digest": content_digest(output),
        "output_chars": len(output),
        "is_error": result.is_error,
    }
    if cut:
        content["output_cut"] = True
    return content


def _response_type(message: ProviderMessage) -> RecordType:
    text = "".join(p.text for p in message.content if isinstance(p, TextPart)).strip()
    calls = any(isinstance(p, ToolUsePart) for p in message.content)
    if calls:
        return RecordType.THOUGHT if text else RecordType.ACTION
    return RecordType.SPEECH if text else RecordType.SILENCE


class JobJournal:
    """Follows one execution of a job's turn (a fresh one per sandbox).

    Args:
        weaves: where the records go.
        root: the job tree's root job id.
        job: this job's id; ``agent``: its agent; ``input``: what it was asked (a checkpoint
            may not change it).
        base: the checkpoint the execution resumes from (None: it starts the turn).
        gate: the agent's approval gate; ``approved``: the calls the controller approved.
        risks: a tool's risk classes as the controller knows them (``AgentSpec.assured_risks``;
            default: the built-in tools' table). What the sandbox says a tool risks is not used.
        anchor: the records the first new record depends on (the input, or the thread's tip).
        recorded: the tool calls of this job already recorded (by an earlier execution).
        max_turns: the most model calls the turn may make (a checkpoint claiming more is a lie).
        workspace: the digest of the workspace manifest the execution starts from ("": none).
    """

    def __init__(
        self,
        weaves: Weaves,
        root: str,
        *,
        job: str,
        agent: str,
        input: TurnInput,
        base: SessionState | None = None,
        gate: ApprovalGate | None = None,
        risks: Callable[[str], tuple[str, ...]] = lambda tool: TOOL_RISKS.get(tool, ()),
        approved: Iterable[str] = (),
        anchor: tuple[str, ...] = (),
        recorded: Iterable[str] = (),
        max_turns: int | None = None,
        workspace: str = "",
    ) -> None:
        self.weaves = weaves
        self.root = root
        self.job = job
        self.agent = agent
        self.input = input
        self.gate = gate
        self.risks = risks
        self.approved = set(approved)
        self.max_turns = max_turns
        #: The latest full state (what a resume continues from).
        self.state: SessionState | None = base
        #: The open step's calls that started (a lost sandbox leaves them in flight).
        self.started: set[str] = set()
        self._recorded: set[str] = set(recorded)
        self._response: dict[str, str] = {}  # tool_use_id -> the record of the response asking for it
        self._since_response: list[str] = []  # records the next response depends on
        self._anchor = anchor
        self._overrides: dict[str, JsonValue] = {}
        if base is not None:
            self.allow_overrides(dict(base.overrides))
        #: Checkpoints received in this execution.
        self.checkpoints = 0
        #: The digest of the workspace's manifest now (set as snapshots arrive; "" for none):
        #: the state hashes of the records cover it.
        self.workspace = workspace
        self._hashed_workspace = workspace  # the one the previous state's hash covered
        #: The latest record this journal wrote (what a checkpoint of the history names).
        self.tip: str | None = anchor[-1] if anchor else None

    def allow_overrides(self, overrides: dict[str, JsonValue]) -> None:
        """The controller sent a budget signal: its limits may appear in later checkpoints."""
        self._overrides.update(overrides)
        turns = overrides.get("max_turns")
        if isinstance(turns, int) and self.max_turns is not None:
            self.max_turns = max(self.max_turns, turns)

    async def observe(self, event: object) -> bool:
        """Follow one sandbox event; True when it is the journal's alone (a checkpoint: not
        recorded as a job event).

        Raises:
            JournalViolation: the checkpoint is inconsistent or shows an unapproved gated call.
        """
        if isinstance(event, ToolStarted):
            self.started.add(event.tool_use_id)
            return False
        if not isinstance(event, Checkpoint):
            return False
        try:
            new = SessionState.from_checkpoint(event, self.state)
        except (ValueError, ValidationError) as e:
            raise JournalViolation(
                f"the sandbox sent an unreadable checkpoint: {shorten(str(e), 300)}"
            ) from e
        self._check(new)
        self.checkpoints += 1
        await self._record(self.state, new)
        if not new.open_uses():
            self.started.clear()
        self.state = new
        return True

    def _check(self, new: SessionState) -> None:
        if new.input != self.input:
            raise JournalViolation("the sandbox's checkpoint changed the turn's input")
        if self.max_turns is not None and new.iterations > self.max_turns:
            raise JournalViolation(
                f"the sandbox's checkpoint reports {new.iterations} model calls; "
                f"the turn allows {self.max_turns}"
            )
        old = self.state
        if old is not None:
            for counter in ("iterations", "tokens_in", "tokens_out"):
                if getattr(new, counter) < getattr(old, counter):
                    raise JournalViolation(f"the sandbox's checkpoint lowered {counter}")
            if new.cost < old.cost:
                raise JournalViolation("the sandbox's checkpoint lowered the cost")
        for key, value in new.overrides.items():
            if key not in self._overrides or self._overrides[key] != value:
                raise JournalViolation(f"the sandbox's checkpoint changed {key} without a budget signal")
        if self.gate is not None:
            for call in new.completed:
                if call.tool_use_id in self.approved or call.tool_use_id in self._recorded:
                    continue
                if call.is_error or call.skipped:
                    continue
                if self.gate.needs(call.name, self.risks(call.name)):
                    raise JournalViolation(
                        f"the sandbox ran {call.name} (call {call.tool_use_id}) without the approval "
                        "its agent's policy requires"
                    )

    async def _record(self, old: SessionState | None, new: SessionState) -> None:
        if old is None and new.iterations == 0:
            return  # context assembled: the input is recorded by the controller
        pre = session_hash(old, self._hashed_workspace) if old is not None else ""
        post = session_hash(new, self.workspace)
        self._hashed_workspace = self.workspace
        before = old.iterations if old is not None else new.iterations
        if new.iterations > before:
            response = self._last_response(new)
            if response is not None:
                await self._response_record(old, new, response, pre, post)
                pre = post
        uses = {u.id: u for u in new.open_uses()}
        for call in new.completed:
            if call.tool_use_id not in self._recorded:
                await self._call_record(uses.get(call.tool_use_id), call, pre, post)
                pre = post
        # results answered at the step's end without a checkpoint of their own
        if new.messages and new.messages[-1].role is Role.USER:
            asked = self._asked(new)
            for part in new.messages[-1].content:
                if isinstance(part, ToolResultPart) and part.tool_use_id not in self._recorded:
                    await self._call_record(asked.get(part.tool_use_id), part, pre, post)
                    pre = post

    @staticmethod
    def _last_response(state: SessionState) -> ProviderMessage | None:
        for message in reversed(state.messages):
            if message.role is Role.ASSISTANT:
                return message
        return None

    @staticmethod
    def _asked(state: SessionState) -> dict[str, ToolUsePart]:
        if len(state.messages) < 2:
            return {}
        return {p.id: p for p in state.messages[-2].content if isinstance(p, ToolUsePart)}

    async def _response_record(
        self, old: SessionState | None, new: SessionState, message: ProviderMessage, pre: str, post: str
    ) -> None:
        tokens_in = new.tokens_in - (old.tokens_in if old is not None else 0)
        tokens_out = new.tokens_out - (old.tokens_out if old is not None else 0)
        cost = new.cost - (old.cost if old is not None else Decimal(0))
        deps = tuple(self._since_response) or self._anchor
        record = await self._add(
            _response_type(message),
            "model_response",
            {"iteration": new.iterations, "content": [p.model_dump(mode="json") for p in message.content]},
            deps,
            pre,
            post,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=cost,
        )
        self._since_response = []
        self._anchor = ()
        for part in message.content:
            if isinstance(part, ToolUsePart):
                self._response[part.id] = record.id

    async def _call_record(
        self, use: ToolUsePart | None, result: ToolExecution | ToolResultPart, pre: str, post: str
    ) -> None:
        self._recorded.add(result.tool_use_id)
        asked_by = self._response.get(result.tool_use_id)
        deps = (asked_by,) if asked_by is not None else ()
        record = await self._add(RecordType.ACTION, "tool_call", call_content(use, result), deps, pre, post)
        self._since_response.append(record.id)

    async def _add(
        self,
        type: RecordType,
        kind: str,
        content: JsonValue,
        deps: tuple[str, ...],
        pre: str,
        post: str,
        **usage: Any,
    ) -> TurnRecord:
        record = await self.weaves.record(
            self.root,
            job=self.job,
            agent=self.agent,
            type=type,
            kind=kind,
            content=content,
            depends_on=deps,
            pre=pre,
            post=post,
            **usage,
        )
        self.tip = record.id
        return record

"""The scripted provider: plays a recorded conversation, deterministically and offline.

Used by the offline demo, most tests and replays. :class:`RecordingProvider` wraps a real
provider and writes its session in the same format, so a live run can be replayed.

Script format (YAML or JSON; validated, unknown keys rejected)::

    version: 1                  # optional, the only version is 1
    steps:                      # one per model call, played in order
      - match:                  # optional; an omitted key matches anything
          tools: [calc, echo]   # names of the tools offered (compared sorted)
          messages: 1           # number of messages in the request
        response:               # a ProviderResponse
          content:              # text | tool_use | tool_result | image | compaction parts
            - {type: text, text: "Let me compute."}
            - {type: tool_use, id: t1, name: calc, input: {expr: "2+2"}}
          stop_reason: tool_use # end_turn | tool_use | max_tokens | stop_sequence |
                                # pause_turn | refusal | model_context_window_exceeded |
                                # content_filter | compaction
          usage: {input_tokens: 12, output_tokens: 7}   # optional, also cache_* counters
          cost: "0.000047"      # optional USD (a string keeps it exact); omitted: None
          model: claude-haiku-4-5-20251001              # optional; default: "scripted"
          stop_detail: null     # optional refusal/filter explanation
          retries: []           # optional: failed attempts the provider retried ("HTTP 529")
          compaction: null      # optional: {tokens_before, tokens_after} of a server-side compaction

The spec's ``script`` is either a path to such a file (``.yaml``/``.yml``/``.json``), a
mapping of this shape, or just the list of steps.

Each request is compared with the next step's ``match``; a mismatch, or a request after
the last step, raises ``TurnError.non_retryable`` naming the step and both signatures.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airlock.errors import SpecError
from airlock.turn import Provider, ProviderRequest, ProviderResponse
from layer0 import TurnError

#: ``model`` of scripted responses that name none.
SCRIPTED_MODEL = "scripted"


class StepMatch(BaseModel):
    """The signature a request must have to be answered by a step (omitted: any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Names of the tools offered, sorted.
    tools: list[str] | None = None
    #: Number of messages in the request.
    messages: int | None = Field(default=None, ge=0)

    def describe(self) -> str:
        """``tools=[a, b] messages=3`` (``*`` for an omitted key)."""
        tools = "*" if self.tools is None else "[" + ", ".join(sorted(self.tools)) + "]"
        messages = "*" if self.messages is None else str(self.messages)
        return f"tools={tools} messages={messages}"

    def matches(self, actual: StepMatch) -> bool:
        """Does a request with signature ``actual`` satisfy this match?"""
        if self.tools is not None and sorted(self.tools) != actual.tools:
            return False
        return self.messages is None or self.messages == actual.messages


class ScriptStep(BaseModel):
    """One model call: what request it expects and what it answers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    match: StepMatch = Field(default_factory=StepMatch)
    response: ProviderResponse


class Script(BaseModel):
    """A recorded conversation: the steps, in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    steps: list[ScriptStep]

    def dump(self, path: str | Path) -> None:
        """Write as YAML (``.yaml``/``.yml``) or JSON (anything else)."""
        path = Path(path)
        data = self.model_dump(mode="json", exclude_defaults=False)
        if path.suffix in (".yaml", ".yml"):
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        else:
            text = json.dumps(data, indent=2) + "\n"
        path.write_text(text, encoding="utf-8")


def request_signature(request: ProviderRequest) -> StepMatch:
    """The signature of a request: sorted tool names and the message count."""
    return StepMatch(tools=sorted(t.name for t in request.tools), messages=len(request.messages))


def load_script(source: str | Path | Sequence[Any] | dict[str, Any]) -> Script:
    """A script from a file path, a mapping, or a bare list of steps.

    Raises:
        SpecError: the file is missing or unreadable, or the content does not validate.
    """
    where = "inline script"
    data: Any = source
    if isinstance(source, str | Path):
        path = Path(source)
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise SpecError(f"cannot read script {path}: {e.strerror or e}") from e
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as e:
            raise SpecError(
                f"script {path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}"
            ) from e
    if isinstance(data, list | tuple):
        data = {"steps": list(data)}
    try:
        return Script.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"invalid {where}: {e}") from e


class ScriptedProvider:
    """Answers each request with the next step of a script, if the request matches it.

    Args:
        script: a :class:`Script`, or anything :func:`load_script` accepts.

    Raises:
        SpecError: the script does not load.
    """

    name = "scripted"

    def __init__(self, script: Script | str | Path | Sequence[Any] | dict[str, Any]) -> None:
        self.script = script if isinstance(script, Script) else load_script(script)
        self._next = 0
        #: Requests answered so far, in order.
        self.requests: list[ProviderRequest] = []

    @property
    def steps_played(self) -> int:
        """How many steps have been answered."""
        return self._next

    @property
    def exhausted(self) -> bool:
        """True once every step has been played."""
        return self._next >= len(self.script.steps)

    def resume_at(self, calls: int) -> None:
        """A resumed turn already made ``calls`` model calls (in another process): the next
        request is answered by step ``calls + 1``."""
        self._next = max(0, calls)

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """The next step's response.

        Raises:
            TurnError: ``non_retryable`` on a signature mismatch or when the script is
                exhausted; the message names the step, expected and actual signatures.
        """
        actual = request_signature(request)
        total = len(self.script.steps)
        if self._next >= total:
            raise TurnError.non_retryable(
                f"scripted provider: script exhausted after {total} step(s); "
                f"unexpected extra request with {actual.describe()}"
            )
        step = self.script.steps[self._next]
        if not step.match.matches(actual):
            raise TurnError.non_retryable(
                f"scripted provider: step {self._next + 1} of {total} expects {step.match.describe()}, "
                f"got a request with {actual.describe()}"
            )
        self._next += 1
        self.requests.append(request)
        response = step.response
        update: dict[str, object] = {"truncated": response.is_truncated()}
        if not response.model:
            update["model"] = request.model or SCRIPTED_MODEL
        return response.model_copy(update=update)


class RecordingProvider:
    """Wraps a real provider and records every successful call as a script step.

    Each step's match is the request's full signature, so replaying the recording with
    :class:`ScriptedProvider` checks that the conversation takes the same shape.

    Args:
        inner: the provider that really answers.
        path: where :meth:`save` writes by default (YAML or JSON by suffix).
    """

    def __init__(self, inner: Provider, path: str | Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path) if path is not None else None
        self._steps: list[ScriptStep] = []

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """Call the inner provider; record the step when it answers (errors propagate)."""
        response = await self.inner.complete(request)
        self._steps.append(ScriptStep(match=request_signature(request), response=response))
        return response

    @property
    def script(self) -> Script:
        """The session so far."""
        return Script(steps=list(self._steps))

    def save(self, path: str | Path | None = None) -> Path:
        """Write the session; returns the path written.

        Raises:
            SpecError: no path given here or at construction.
        """
        target = Path(path) if path is not None else self.path
        if target is None:
            raise SpecError("RecordingProvider.save needs a path (none given at construction)")
        self.script.dump(target)
        return target

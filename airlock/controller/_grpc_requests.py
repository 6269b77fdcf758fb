"""Reading the controller's requests: every problem of a malformed request at once.

A request is read whole before it is refused: decoding problems (a TurnInput that is not
one) and validation problems (a required field left empty, a Duration out of range) come back
together, each located by its field path, so that a client fixes them all in one go.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration
from pydantic import JsonValue

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.jobs import FixedPointRun
from airlock.jobs import convert as jc
from layer0 import TurnInput

from ._grpc_errors import required

#: The range of a valid google.protobuf.Duration (its documented bounds, about 10,000 years).
#: Beyond it a limit in ms no longer fits the job store's 64-bit integers.
_MAX_DURATION_SECONDS = 315_576_000_000


@dataclass(frozen=True)
class Submission:
    """A SubmitJob request, read: what JobService.submit takes besides agent and files."""

    input: TurnInput
    #: None: the default (absent or zero on the wire).
    max_duration_ms: int | None
    until_stable: FixedPointRun | None


def duration_problems(duration: Duration, path: str) -> list[wire.Problem]:
    """What makes ``duration`` not a valid google.protobuf.Duration (or negative)."""
    if not -_MAX_DURATION_SECONDS <= duration.seconds <= _MAX_DURATION_SECONDS:
        text = f"{duration.seconds} s is outside a Duration's range (±{_MAX_DURATION_SECONDS} s)"
        return [wire.Problem(path, text)]
    if not -999_999_999 <= duration.nanos <= 999_999_999:
        return [wire.Problem(path, f"nanos {duration.nanos} is outside a Duration's range (±999999999)")]
    if duration.seconds < 0 or duration.nanos < 0:
        return [wire.Problem(path, "must not be negative (0: the default)")]
    if duration.seconds == 0 and 0 < duration.nanos < 1_000_000:
        return [wire.Problem(path, "must be at least 1 ms (0: the default)")]
    return []


def read_submission(request: cpb.SubmitJobRequest) -> Submission:
    """The request's input and limits.

    Raises:
        MalformedMessage: every problem of the request (agent, input, max_duration, until_stable).
    """
    problems = required(request, "agent")
    turn_input = _input(request, problems)
    max_ms = None
    if request.HasField("max_duration"):
        found = duration_problems(request.max_duration, "max_duration")
        problems += found
        max_ms = None if found else wire.duration_from_proto(request.max_duration) or None
    until_stable = None
    if request.HasField("until_stable"):
        try:
            until_stable = jc.until_stable_from_proto(request.until_stable)
        except wire.MalformedMessage as e:
            problems += e.problems
    if problems or turn_input is None:
        raise wire.MalformedMessage(problems=problems)
    return Submission(turn_input, max_ms, until_stable)


def _input(request: cpb.SubmitJobRequest, problems: list[wire.Problem]) -> TurnInput | None:
    """The request's TurnInput, or None with its problems added to ``problems``."""
    if not request.HasField("input"):
        problems.append(wire.Problem("input", "is required (a TurnInput)"))
        return None
    config = request.input.config
    if request.input.HasField("config") and config.HasField("max_duration"):
        found = duration_problems(config.max_duration, "input.config.max_duration")
        if found:
            problems += found
            return None
    try:
        turn_input = wire.input_from_proto(request.input)
    except wire.MalformedMessage as e:
        problems += e.under("input").problems
        return None
    if not turn_input.message.as_blocks():
        problems.append(wire.Problem("input.message", "empty"))
        return None
    return turn_input


def read_signal(request: cpb.SignalWorkflowRequest) -> JsonValue:
    """The signal's data.

    Raises:
        MalformedMessage: every problem (workflow, signal_type, data).
    """
    problems = required(request, "workflow", "signal_type")
    data: JsonValue = None
    try:
        data = wire.json_from_proto(request.data, present=request.HasField("data"))
    except wire.MalformedMessage as e:
        problems += e.under("data").problems
    if problems:
        raise wire.MalformedMessage(problems=problems)
    return data


def read_decision(request: cpb.ApproveJobRequest | cpb.RejectJobRequest) -> None:
    """Check an approval or a rejection (a rejection's reason is what the model reads).

    Raises:
        MalformedMessage: every problem (id, reason).
    """
    problems = required(request, "id")
    if isinstance(request, cpb.RejectJobRequest) and not request.reason.strip():
        problems.append(wire.Problem("reason", "is required (the model reads it)"))
    if problems:
        raise wire.MalformedMessage(problems=problems)

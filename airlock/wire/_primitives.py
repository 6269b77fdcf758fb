"""Free JSON, durations, decimals and oneofs on the wire.

Free JSON travels as JSON text (the ``Json`` message), not ``google.protobuf.Value``:
``Value`` holds every number as a double, which would turn ``1`` into ``1.0`` and cut
integers beyond 2**53. JSON text written with ``json.dumps`` and read with ``json.loads``
keeps ints (of any size), floats (``repr`` round-trips exactly), ``null`` and strings. NaN and
infinities are refused, as layer0 refuses them. Decimals travel as their plain text
(``decimal_to_str``), keeping the scale; durations as ``google.protobuf.Duration`` built from
whole milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from pydantic import JsonValue, ValidationError

from airlock._proto.runner.v1 import runner_pb2 as pb
from layer0 import json_depth

from ._problems import MalformedMessage, validation_problems

_P = ParamSpec("_P")
_R = TypeVar("_R")
_M = TypeVar("_M", bound=Message)


def decoder(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Report pydantic validation errors of a decoder as a MalformedMessage."""

    @wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return func(*args, **kwargs)
        except ValidationError as e:
            raise MalformedMessage(problems=validation_problems(e)) from e

    return wrapper


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_to_proto(value: Any) -> pb.Json:
    """Free JSON as a ``Json`` message (JSON text; NaN/infinity refused)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise MalformedMessage(f"value is not JSON: {e}") from e
    return pb.Json(text=text)


def json_text(value: Any) -> str:
    """The JSON text ``json_to_proto`` would carry."""
    return str(json_to_proto(value).text)


#: The deepest JSON value the wire accepts (arrays and objects inside each other). Deeper
#: text is refused before anything recursive (validation, serialization) ever sees it.
MAX_JSON_DEPTH = 64


def json_from_proto(message: pb.Json, *, present: bool = True) -> JsonValue:
    """The JSON value of a ``Json`` message; absent (or empty text) reads as ``None``.

    Raises:
        MalformedMessage: not JSON, or nested deeper than :data:`MAX_JSON_DEPTH`.
    """
    if not present or not message.text:
        return None
    try:
        value: JsonValue = json.loads(message.text, parse_constant=_reject_constant)
    except RecursionError as e:
        raise MalformedMessage(f"JSON text nested deeper than {MAX_JSON_DEPTH} levels") from e
    except ValueError as e:
        raise MalformedMessage(f"invalid JSON text: {e}") from e
    if json_depth(value) > MAX_JSON_DEPTH:
        raise MalformedMessage(f"JSON text nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def json_field(message: Any, field: str) -> JsonValue:
    """The JSON value of ``message.<field>`` (a ``Json``), located at ``field`` on error."""
    try:
        return json_from_proto(getattr(message, field), present=message.HasField(field))
    except MalformedMessage as e:
        raise e.under(field) from e


def duration_to_proto(ms: int) -> Duration:
    """Whole milliseconds as a Duration."""
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_from_proto(duration: Duration) -> int:
    """A Duration as whole milliseconds (sub-millisecond parts are dropped)."""
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def seconds_to_proto(seconds: float) -> Duration:
    """Seconds (a float) as a Duration, to the nanosecond."""
    duration = Duration()
    duration.FromNanoseconds(round(seconds * 1_000_000_000))
    return duration


def seconds_from_proto(duration: Duration) -> float:
    """A Duration as seconds (a float)."""
    return int(duration.ToNanoseconds()) / 1_000_000_000


def decimal_from_text(text: str, path: str) -> Decimal:
    """Decimal text as a finite Decimal (its scale kept).

    Raises:
        MalformedMessage: not decimal text, or not finite.
    """
    try:
        value = Decimal(text)
    except ArithmeticError as e:
        raise MalformedMessage(f"invalid decimal text {text!r}", path=path) from e
    if not value.is_finite():
        raise MalformedMessage(f"a decimal must be finite, got {text!r}", path=path)
    return value


def oneof(message: Any, group: str) -> str:
    """The name of the variant set in ``message``'s oneof ``group``.

    Raises:
        MalformedMessage: no variant is set.
    """
    kind = message.WhichOneof(group)
    if kind is None:
        raise MalformedMessage(f"no variant of {group!r} set")
    return str(kind)


def with_variant(message: _M, variant: str) -> _M:
    """Select a unit (``Empty``) or message variant of ``message``'s oneof."""
    getattr(message, variant).SetInParent()
    return message


def required(message: Any, field: str) -> Any:
    """``message.<field>``, a message field that must be present (call it inside
    ``located(field)``: the problem carries no path of its own).

    Raises:
        MalformedMessage: the field is absent.
    """
    if not message.HasField(field):
        raise MalformedMessage("required")
    return getattr(message, field)

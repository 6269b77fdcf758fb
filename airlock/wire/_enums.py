"""Closed sets of values ↔ their proto enums.

Each proto enum spells a value ``<PREFIX><VALUE IN UPPER CASE>`` (``PROVIDER_KIND_OPENAI_COMPAT``
for ``openai_compat``); its 0 value ``<PREFIX>UNSPECIFIED`` is never a value. Reading an
unspecified or unknown number is a :class:`MalformedMessage` that lists the valid names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar, get_args

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.spec import HOOK_NAMES, PROVIDER_KINDS, RISK_CLASSES, ContextSpec, McpServerSpec, ProviderSpec
from airlock.turn import StopReason
from layer0 import LogLevel

from ._problems import MalformedMessage

_V = TypeVar("_V", bound=str)

#: layer0 TurnError kinds.
TURN_ERROR_KINDS = ("model", "tool", "context_assembly", "retryable", "non_retryable", "other")


class WireEnum(Generic[_V]):
    """A closed set of string values and the proto enum that carries it.

    Args:
        enum: the generated enum wrapper (``pb.ProviderKind``).
        prefix: its values' prefix (``"PROVIDER_KIND_"``).
        values: every value of the set; each must have its enum value (else ValueError).
        what: how a message names the set (``"provider kind"``).
    """

    def __init__(self, enum: Any, prefix: str, values: Iterable[_V], what: str) -> None:
        self.enum = enum
        self.what = what
        self.unspecified = f"{prefix}UNSPECIFIED"
        self._to_proto: dict[_V, int] = {v: int(enum.Value(prefix + str(v).upper())) for v in values}
        self._from_proto: dict[int, _V] = {n: v for v, n in self._to_proto.items()}

    @property
    def values(self) -> list[_V]:
        """The values, in enum order."""
        return [self._from_proto[n] for n in sorted(self._from_proto)]

    def names(self) -> list[str]:
        """The proto names of the values, in enum order."""
        return [str(self.enum.Name(n)) for n in sorted(self._from_proto)]

    def to_proto(self, value: str) -> Any:
        """The enum number of ``value``.

        Raises:
            MalformedMessage: ``value`` is not in the set.
        """
        try:
            return self._to_proto[value]  # type: ignore[index]
        except KeyError:
            valid = ", ".join(self._from_proto.values())
            raise MalformedMessage(f"unknown {self.what} {value!r}; valid: {valid}") from None

    def from_proto(self, number: int, path: str = "") -> _V:
        """The value an enum number stands for.

        Raises:
            MalformedMessage: unspecified (0) or a number this version does not know.
        """
        try:
            return self._from_proto[number]
        except KeyError:
            valid = ", ".join(self.names())
            what = f"required (got {self.unspecified})" if number == 0 else f"unknown {self.what} {number}"
            raise MalformedMessage(f"{what}; valid: {valid}", path=path) from None


PROVIDER_KIND: WireEnum[str] = WireEnum(pb.ProviderKind, "PROVIDER_KIND_", PROVIDER_KINDS, "provider kind")
CONTEXT_STRATEGY: WireEnum[str] = WireEnum(
    pb.ContextStrategy,
    "CONTEXT_STRATEGY_",
    get_args(ContextSpec.model_fields["strategy"].annotation),
    "context strategy",
)
LOG_LEVEL: WireEnum[LogLevel] = WireEnum(pb.LogLevel, "LOG_LEVEL_", LogLevel, "log level")
STOP_REASON: WireEnum[StopReason] = WireEnum(pb.StopReason, "STOP_REASON_", StopReason, "stop reason")
TURN_ERROR_KIND: WireEnum[str] = WireEnum(
    pb.TurnErrorKind, "TURN_ERROR_KIND_", TURN_ERROR_KINDS, "turn error kind"
)
TOOL_CHOICE: WireEnum[str] = WireEnum(
    pb.ToolChoice,
    "TOOL_CHOICE_",
    get_args(ProviderSpec.model_fields["tool_choice_first"].annotation),
    "tool choice",
)
MCP_TRANSPORT: WireEnum[str] = WireEnum(
    pb.McpTransport,
    "MCP_TRANSPORT_",
    get_args(McpServerSpec.model_fields["transport"].annotation),
    "MCP transport",
)
HOOK_KIND: WireEnum[str] = WireEnum(pb.HookKind, "HOOK_KIND_", HOOK_NAMES, "hook kind")
RISK_CLASS: WireEnum[str] = WireEnum(pb.RiskClass, "RISK_CLASS_", RISK_CLASSES, "risk class")
#: What a delivered signal did (``SignalDelivered.action``).
SIGNAL_ACTIONS = ("feedback", "budget", "cancel", "ignored")
SIGNAL_ACTION: WireEnum[str] = WireEnum(pb.SignalAction, "SIGNAL_ACTION_", SIGNAL_ACTIONS, "signal action")

#: Every closed set the runner's wire carries as an enum.
WIRE_ENUMS: tuple[WireEnum[Any], ...] = (
    PROVIDER_KIND,
    CONTEXT_STRATEGY,
    LOG_LEVEL,
    STOP_REASON,
    TURN_ERROR_KIND,
    TOOL_CHOICE,
    MCP_TRANSPORT,
    SIGNAL_ACTION,
    HOOK_KIND,
    RISK_CLASS,
)

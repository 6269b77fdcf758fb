"""Protocol ①, the Turn itself (the upstream crate's later name: Operator)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ._output import TurnOutput
from ._turn import TurnConfig, TurnInput, TurnMetadata


@runtime_checkable
class Turn(Protocol):
    """Protocol ①: receive input, assemble context, reason, act, return output + effects.

    A turn MAY read state during context assembly and MUST NOT write it: writes are
    declared as effects in the output.
    """

    async def execute(self, input: TurnInput) -> TurnOutput:
        """Run one turn. Raises ``TurnError`` on failure."""
        ...


# The upstream crate later renamed Turn* to Operator*; both names are kept.
Operator = Turn
OperatorInput = TurnInput
OperatorOutput = TurnOutput
OperatorConfig = TurnConfig
OperatorMetadata = TurnMetadata

"""The command provider: no model; each turn runs the user's message as one ``bash`` call.

Deterministic and offline. The first request's last user message becomes one call of the
agent's ``bash`` tool; the next request (carrying that call's result) is answered with the
result's text and ``end_turn``. Usage is zero and cost 0.

It exists to probe a sandbox's policy (the Helm chart's isolation test runs probe programs
this way) and for operators' debugging. It gives whoever submits jobs no more than any agent
with ``bash`` has, since a model can be made to run anything: the sandbox is untrusted either
way, and the agent's network policy, credentials and limits apply unchanged.
"""

from __future__ import annotations

from decimal import Decimal

from airlock.turn import (
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from layer0 import TurnError

#: The model name its responses carry.
COMMAND_MODEL = "command"
#: The one tool it calls.
COMMAND_TOOL = "bash"


class CommandProvider:
    """Runs the user's message with ``bash``, then answers with what the call returned."""

    name = "command"

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """A ``bash`` call for the user's message, or the text of that call's result.

        Raises:
            TurnError: ``non_retryable`` when ``bash`` is not offered or there is no command.
        """
        if COMMAND_TOOL not in {t.name for t in request.tools}:
            raise TurnError.non_retryable(
                "command provider: the agent has no bash tool to run the command with"
            )
        last = request.messages[-1] if request.messages else None
        results = [p for p in (last.content if last else []) if isinstance(p, ToolResultPart)]
        if results:
            text = "\n".join(r.content for r in results)
            return _response([TextPart(text=text)], StopReason.END_TURN)
        command = "\n".join(
            p.text
            for m in request.messages
            if m.role == Role.USER
            for p in m.content
            if isinstance(p, TextPart)
        ).strip()
        if not command:
            raise TurnError.non_retryable("command provider: the message holds no command")
        call = ToolUsePart(id=f"cmd-{len(request.messages)}", name=COMMAND_TOOL, input={"command": command})
        return _response([call], StopReason.TOOL_USE)


def _response(content: list[TextPart | ToolUsePart], stop: StopReason) -> ProviderResponse:
    return ProviderResponse(
        content=list(content), stop_reason=stop, model=COMMAND_MODEL, cost=Decimal(0), truncated=False
    )

"""What started a turn, stated to the model: one short line before the input message.

A person's message (``user``) needs no preamble. Any other trigger changes what the model
should assume about its reader: a task's answer goes back to the agent that assigned it
(a handoff, which the controller sends as a task with ``metadata.handoff_from``, continues
another agent's conversation); a schedule, a signal or a system event has no one waiting
for a reply. The line is the first part of the turn's first user message, so it stays in
the session's history with the message it explains, and the system prompt (the agent's
own, and the cache prefix) is unchanged.
"""

from __future__ import annotations

from layer0 import TriggerType, TurnInput

_NOTES = {
    "task": (
        "[Trigger: task] Another agent assigned you the task below; your final answer is returned "
        "to that agent, not shown to a person."
    ),
    "signal": (
        "[Trigger: signal] A signal from another workflow or agent started this turn; no person "
        "is waiting for a reply."
    ),
    "schedule": (
        "[Trigger: schedule] A schedule started this turn; no person is waiting for a reply. Do "
        "the work below and report what you did."
    ),
    "system_event": (
        "[Trigger: system event] A system event (such as a file change or a webhook) started "
        "this turn; it is described below. No person is waiting for a reply."
    ),
}


def trigger_note(input: TurnInput) -> str | None:
    """The preamble stating ``input.trigger`` to the model; None for a person's message."""
    trigger: TriggerType = input.trigger
    if trigger.kind == "user":
        return None
    if trigger.kind == "custom":
        name = trigger.custom_name
        return f"[Trigger: {name}] This turn was started by {name!r}, not by a person's message."
    metadata = input.metadata if isinstance(input.metadata, dict) else {}
    source = metadata.get("handoff_from")
    if trigger.kind == "task" and "handoff_state" in metadata:
        who = f"Agent {source}" if isinstance(source, str) and source else "Another agent"
        return (
            f"[Trigger: handoff] {who} handed this conversation over to you, with the state below; "
            "carry on from there."
        )
    return _NOTES.get(trigger.kind)

"""Scripted agents: ``AgentSpec``s on the deterministic, offline ``scripted`` provider.

A step is one model call in the scripted provider's format (see
``airlock.providers._scripted``): a ``response`` to play and, optionally, the ``match`` a
request must satisfy. The builders return plain JSON-shaped dicts, so the same steps can
go inline into ``ProviderSpec(script=...)``, into a configuration's agent, or into a
script file (:func:`script_yaml`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from airlock.spec import AgentSpec, ProviderSpec

#: One scripted model call: ``{"response": {...}}`` plus an optional ``"match"``.
Step = dict[str, Any]


def _step(
    content: list[dict[str, Any]],
    stop_reason: str,
    usage: tuple[int, int] | None,
    cost: str | None,
    match: Mapping[str, Any] | None,
) -> Step:
    response: dict[str, Any] = {"content": content, "stop_reason": stop_reason}
    if usage is not None:
        response["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    if cost is not None:
        response["cost"] = cost
    return {"match": dict(match), "response": response} if match else {"response": response}


def text_step(
    text: str,
    *,
    usage: tuple[int, int] | None = None,
    cost: str | None = None,
    match: Mapping[str, Any] | None = None,
) -> Step:
    """A step that answers ``text`` and ends the turn.

    Args:
        text: the answer.
        usage: ``(input_tokens, output_tokens)`` the call reports (None: no usage).
        cost: USD the call reports, as a string to stay exact (None: unknown).
        match: the request signature the step expects, e.g. ``{"messages": 3}``.
    """
    return _step([{"type": "text", "text": text}], "end_turn", usage, cost, match)


def tool_step(
    name: str,
    input: Mapping[str, Any],
    *,
    id: str = "t1",
    text: str = "",
    usage: tuple[int, int] | None = None,
    cost: str | None = None,
    match: Mapping[str, Any] | None = None,
) -> Step:
    """A step that calls one tool (``id`` names the call), after ``text`` if given.

    ``usage``, ``cost`` and ``match`` as in :func:`text_step`.
    """
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": id, "name": name, "input": dict(input)})
    return _step(content, "tool_use", usage, cost, match)


def tools_step(
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    usage: tuple[int, int] | None = None,
    cost: str | None = None,
    match: Mapping[str, Any] | None = None,
) -> Step:
    """A step that calls several tools at once: ``(name, input)`` pairs, ids ``t0, t1, …``.

    ``usage``, ``cost`` and ``match`` as in :func:`text_step`.
    """
    content = [
        {"type": "tool_use", "id": f"t{i}", "name": name, "input": dict(input)}
        for i, (name, input) in enumerate(calls)
    ]
    return _step(content, "tool_use", usage, cost, match)


def scripted_agent(
    steps: Sequence[Mapping[str, Any]],
    *,
    name: str = "scripted-agent",
    tools: Sequence[str] = (),
    **fields: Any,
) -> AgentSpec:
    """An agent on the scripted provider that plays ``steps``, offered ``tools``.

    ``fields`` are further ``AgentSpec`` fields (``system``, ``defaults``, ``hooks``, …).
    """
    provider = ProviderSpec(kind="scripted", script=[dict(s) for s in steps])
    return AgentSpec(name=name, provider=provider, tools=list(tools), **fields)


def bash_agent(*commands: str, final: str = "done", name: str = "bash-agent", **fields: Any) -> AgentSpec:
    """An agent that runs each bash command (one model call each), then answers ``final``.

    Every call reports usage and a cost (command ``i``: ``10 + i`` tokens in, 5 out,
    $0.0001; the answer: 20 in, 3 out, $0.0002), so totals can be checked. ``fields`` as in
    :func:`scripted_agent`.
    """
    steps = [
        tool_step("bash", {"command": command}, id=f"t{i}", usage=(10 + i, 5), cost="0.0001")
        for i, command in enumerate(commands)
    ]
    steps.append(text_step(final, usage=(20, 3), cost="0.0002"))
    return scripted_agent(steps, name=name, tools=["bash"], **fields)


def calculator_script() -> list[Step]:
    """The calculator conversation: the model asks the ``calculator`` tool for ``17 * 23``,
    then answers ``17 x 23 = 391.`` — 100 tokens in, 20 out, $0.0003 over two calls.

    The steps match (the tools offered are exactly ``[calculator]``; the first call sees one
    message, the second three), so an agent offered other tools, or sent a session's history,
    fails loudly. It is the conversation of ``examples/scripts/calculator.yaml``, with usage
    and costs.
    """
    return [
        tool_step(
            "calculator",
            {"expression": "17 * 23"},
            id="call_1",
            usage=(40, 12),
            cost="0.0001",
            match={"tools": ["calculator"], "messages": 1},
        ),
        text_step(
            "17 x 23 = 391.",
            usage=(60, 8),
            cost="0.0002",
            match={"tools": ["calculator"], "messages": 3},
        ),
    ]


def calculator_agent(*, name: str = "calculator-agent", **fields: Any) -> AgentSpec:
    """An agent with the ``calculator`` tool playing :func:`calculator_script`.

    ``fields`` as in :func:`scripted_agent`.
    """
    return scripted_agent(calculator_script(), name=name, tools=["calculator"], **fields)


def script_yaml(steps: Sequence[Mapping[str, Any]]) -> str:
    """The text of a script file (``version: 1`` and ``steps``) that plays ``steps``."""
    document = {"version": 1, "steps": [dict(s) for s in steps]}
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)

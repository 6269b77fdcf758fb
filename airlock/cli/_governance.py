"""The verbs that steer a job on a controller: ``airlock approve`` / ``reject`` (a person
decides on the tool calls a job waits for), ``airlock signal`` (to a workflow's running turns)
and ``airlock jobs pause / resume / step / inspect`` (a running turn, step by step)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue
from rich.markup import escape
from rich.table import Table

from airlock.jobs import ControllerClient, Inspection, Job, JobEvent, JobState

from ._common import EXIT_USAGE, console, fail
from ._jobs import JobView, Target, _agent_of, _dump, _state, _with_client
from ._render import call_line, decision_text, message_text

# -- approve / reject --------------------------------------------------------------------------------


def decide(target: Target, job_id: str, *, approve: bool, comment: str, as_json: bool) -> None:
    """Record the caller's decision on the calls ``job_id`` waits for (as the principal its
    credential authenticates); print the job's state and, while it still waits, the decisions
    so far."""

    async def work(client: ControllerClient) -> tuple[Job, str]:
        me = await client.whoami()
        if approve:
            return await client.approve(job_id, comment), me.name
        return await client.reject(job_id, comment), me.name

    job, approver = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"job": _dump(job), "decision": "approved" if approve else "rejected"}))
        return
    verb = "approved" if approve else "rejected"
    console.print(
        f"{verb} job {escape(job.id)} as {escape(approver)}: it is {_state(job.state)}", highlight=False
    )
    wait = job.approval
    if wait is None:
        return
    if job.state is JobState.AWAITING_APPROVAL and wait.outcome is None:
        console.print(
            f"still waiting ({escape(wait.strategy)} of {escape(', '.join(wait.approvers))}); "
            "decided so far:",
            highlight=False,
        )
        for decision in wait.decisions:
            console.print(f"  {decision_text(decision)}", highlight=False, soft_wrap=True)
    elif wait.outcome is not None:
        colour = "green" if wait.outcome == "approved" else "red"
        console.print(f"outcome: [{colour}]{wait.outcome}[/]; the job resumes", highlight=False)


# -- signal ------------------------------------------------------------------------------------------


def parse_data(text: str | None) -> JsonValue:
    """``--data`` as JSON (None: no data); exits 2 naming the problem when it is not JSON."""
    if text is None:
        return None
    try:
        value: JsonValue = json.loads(text)
    except ValueError as e:
        fail(f"--data is not valid JSON ({e}): {text[:80]!r}", EXIT_USAGE)
    return value


def signal(target: Target, workflow: str, signal_type: str, data: str | None, as_json: bool) -> None:
    """Send a signal to a workflow; print how many it has received and the jobs it reached."""
    value = parse_data(data)

    async def work(client: ControllerClient) -> tuple[int, list[str]]:
        return await client.signal(workflow, signal_type, value)

    count, delivered = _with_client(target, as_json, work)
    if as_json:
        body = {"workflow": workflow, "signal_type": signal_type, "count": count, "delivered_to": delivered}
        print(json.dumps(body))
        return
    console.print(
        f"signal {escape(signal_type)} recorded for workflow {escape(workflow)} (its signal #{count})",
        highlight=False,
    )
    if delivered:
        console.print(
            f"reached {len(delivered)} running job(s): {escape(', '.join(delivered))}", highlight=False
        )
    else:
        console.print("[dim]no turn of the workflow runs now: it reached no job[/]", highlight=False)


# -- pause / resume / step --------------------------------------------------------------------------


def control(target: Target, job_id: str, verb: str, as_json: bool) -> None:
    """``pause`` or ``resume`` the job's running turn."""

    async def work(client: ControllerClient) -> None:
        await (client.pause(job_id) if verb == "pause" else client.resume(job_id))

    _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"job": job_id, verb: True}))
        return
    job = escape(job_id)
    if verb == "pause":
        console.print(
            f"job {job} pauses at its next step boundary (step it with airlock jobs step {job}; "
            f"let it run on with airlock jobs resume {job})",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(f"job {job} runs on", highlight=False)


@dataclass(frozen=True)
class _Step:
    complete: bool
    text: str
    tools: list[str]
    events: list[JobEvent]


def step(target: Target, job_id: str, as_json: bool) -> None:
    """Run one step of the job's paused turn; print the model's text, the tools run, and the
    events the job recorded meanwhile (as ``jobs watch`` shows them)."""

    async def work(client: ControllerClient) -> _Step:
        info, events = await client.step(job_id)
        if not as_json:
            job = await client.get(job_id)
            view = JobView(console, job, await _agent_of(client, job.agent))
            for event in events:
                await view.job_event(event)
            view.stop()
        return _Step(info.complete, info.text, list(info.tools), events)

    done = _with_client(target, as_json, work)
    if as_json:
        body = {
            "job": job_id,
            "complete": done.complete,
            "text": done.text,
            "tools": done.tools,
            "events": [e.model_dump(mode="json") for e in done.events],
        }
        print(json.dumps(body))
        return
    console.rule("step", style="dim")
    text = done.text.strip()
    console.print(f"model: {escape(text)}" if text else "[dim]model: (no text)[/]", highlight=False)
    console.print(f"tools run: {escape(', '.join(done.tools)) if done.tools else 'none'}", highlight=False)
    if done.complete:
        console.print("[green]the step finished the turn[/]", highlight=False)
    else:
        console.print(f"[dim]paused again; next: airlock jobs step {escape(job_id)}[/]", highlight=False)


# -- inspect -------------------------------------------------------------------------------------------


def inspection_json(found: Inspection) -> dict[str, Any]:
    """What ``jobs inspect --json`` prints."""
    return {
        "job": found.job.id,
        "state": found.job.state.value,
        "running": found.running,
        "paused": found.paused,
        "session": found.state.model_dump(mode="json") if found.state is not None else None,
        "pending": [c.model_dump(mode="json") for c in found.pending],
    }


def inspect(target: Target, job_id: str, as_json: bool) -> None:
    """The job's session as of its latest checkpoint: counters, messages, pending calls."""

    async def work(client: ControllerClient) -> Inspection:
        return await client.inspect(job_id)

    found = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps(inspection_json(found)))
        return
    turn = "paused" if found.paused else "running" if found.running else "not running in a sandbox"
    console.print(
        f"job {escape(found.job.id)} ({escape(found.job.agent)}) {_state(found.job.state)}; "
        f"its turn is {turn}",
        highlight=False,
    )
    state = found.state
    if state is None:
        console.print("[dim]no checkpoint yet: the turn has not started[/]", highlight=False)
    else:
        tools = Counter(r.name for r in state.tool_records)
        table = Table(show_header=False, box=None, padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row("iterations", str(state.iterations))
        table.add_row("tokens in / out", f"{state.tokens_in} / {state.tokens_out}")
        table.add_row("cost", f"${state.cost.normalize():f}" if state.cost else "$0")
        calls = ", ".join(f"{n} x{c}" for n, c in tools.items())
        table.add_row("tool calls", f"{sum(tools.values())}" + (f" ({escape(calls)})" if calls else ""))
        console.print(table, highlight=False)
        console.rule(f"messages ({len(state.messages)})", style="dim")
        for i, message in enumerate(state.messages, 1):
            console.print(
                f"[dim]{i:>3}[/] [bold]{escape(message.role.value)}[/]: {escape(message_text(message))}",
                highlight=False,
                soft_wrap=True,
            )
    if found.pending:
        console.rule(f"pending calls ({len(found.pending)})", style="dim")
        for call in found.pending:
            console.print(
                f"  {call_line(call)} [dim]{escape(call.tool_use_id)}[/]", highlight=False, soft_wrap=True
            )
    elif state is not None:
        console.print("[dim]no pending calls[/]", highlight=False)

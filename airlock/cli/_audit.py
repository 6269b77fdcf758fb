"""``airlock jobs audit`` (a job tree's turn records as a timeline per thread, children under
the job that delegated them) and ``airlock jobs verify`` (their hash chain and seals)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import typer
from rich.markup import escape
from rich.tree import Tree

from airlock.jobs import ControllerClient, ControllerError, Job
from airlock.weave import ChainReport, RecordType, TurnRecord

from ._common import EXIT_INCOMPLETE, EXIT_OK, console, err_console
from ._jobs import Target, _state, _with_client
from ._render import preview, shorten

_TYPE_COLOURS = {
    RecordType.SPEECH: "green",
    RecordType.ACTION: "magenta",
    RecordType.THOUGHT: "blue",
    RecordType.YIELD: "yellow",
    RecordType.SILENCE: "dim",
}

#: Characters of one record's summary.
_SUMMARY = 120


# -- summaries of record contents ---------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    """The text of a layer0 Content or a list of parts (JSON): its string, or its ``text`` fields."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return [value["text"]]
    return []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _response(content: dict[str, Any]) -> str:
    parts = _list(content.get("content"))
    said = " ".join(t for p in parts if isinstance(p, dict) and p.get("type") == "text" for t in _texts(p))
    calls = [
        f"→ {p.get('name')}({preview(p.get('input'), 60)})"
        for p in parts
        if isinstance(p, dict) and p.get("type") == "tool_use"
    ]
    text = f'"{shorten(said, 80)}"' if said.strip() else ""
    return " ".join([text, *calls]).strip() or "(nothing said)"


def _tool_call(content: dict[str, Any]) -> str:
    mark = " ✗" if content.get("is_error") else ""
    output = preview(content.get("output", ""), 60)
    return f"{content.get('tool', '?')}({preview(content.get('input'), 60)}) -> {output}{mark}"


def _decision(content: dict[str, Any]) -> str:
    verdict = "approved" if content.get("approve") else "rejected"
    auto = " (automatic)" if content.get("automatic") else ""
    comment = f": {content['comment']}" if content.get("comment") else ""
    return f"{content.get('approver', '?')} {verdict}{auto}{comment}"


def _requested(content: dict[str, Any]) -> str:
    calls = _list(content.get("calls"))
    names = ", ".join(str(c.get("name")) for c in calls if isinstance(c, dict)) or "no calls"
    approvers = ", ".join(str(a) for a in _list(content.get("approvers"))) or "nobody"
    return f"{names} wait for {content.get('strategy', '?')} of {approvers}"


def _resume(content: dict[str, Any]) -> str:
    return (
        f"resume {content.get('resume', '?')} ({content.get('cause', '?')}): {content.get('reason', '')}; "
        f"after model call {content.get('iteration', '?')}"
    )


def _signal(content: dict[str, Any]) -> str:
    data = f" {preview(content['data'], 60)}" if content.get("data") is not None else ""
    sender = f" from job {content['from_job']}" if content.get("from_job") else ""
    return f"{content.get('signal_type', '?')}{data}{sender}"


def _iteration(content: dict[str, Any]) -> str:
    why = f": {content['exit']}" if content.get("exit") else ""
    return f"iteration {content.get('iteration', '?')}{why}"


#: How each kind of record the controller writes is summed up (others: their JSON).
_SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "input": lambda c: f'"{shorten(" ".join(_texts(c.get("message"))), 80)}"',
    "model_response": _response,
    "tool_call": _tool_call,
    "approval_requested": _requested,
    "approval_decision": _decision,
    "approval_resolved": lambda c: str(c.get("outcome", "?")),
    "resume": _resume,
    "signal": _signal,
    "iteration": _iteration,
}


def summary(record: TurnRecord) -> str:
    """A record's content on one short line (not escaped): the model's text and calls,
    ``tool(input) -> output``, an approver's decision, a resume's reason, …"""
    content = record.content
    how = _SUMMARIES.get(record.kind)
    if how is not None and isinstance(content, dict):
        return shorten(how(content), _SUMMARY)
    return "" if content is None else preview(content, _SUMMARY)


def _ref(record_id: str, job: str) -> str:
    """A record id as a thread's line shows it: ``#n`` in the same thread, else ``job:n``."""
    thread, _, n = record_id.rpartition(":")
    return f"#{n}" if thread == job else record_id


def record_line(record: TurnRecord) -> str:
    """One record on one line (markup): clock, ``#n`` in its thread, type, kind, summary,
    usage, and the records it depends on (``#n`` in its thread, else ``job:n``)."""
    colour = _TYPE_COLOURS[record.type]
    usage = ""
    if record.tokens_in or record.tokens_out:
        usage += f"  [dim]{record.tokens_in}/{record.tokens_out} tokens[/]"
    if record.cost:
        usage += f"  [dim]${record.cost.normalize():f}[/]"
    deps = ", ".join(_ref(d, record.job) for d in record.depends_on)
    after = f"  [dim]<- {escape(deps)}[/]" if deps else ""
    return (
        f"[dim]{record.clock:>4}[/] #{record.n:<3} [{colour}]{record.type.value.upper():<7}[/] "
        f"[bold]{escape(record.kind)}[/] {escape(summary(record))}{usage}{after}"
    )


# -- the tree of threads ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobWeave:
    """A job tree's records and the jobs of its threads (those the controller still knows)."""

    root: str
    records: list[TurnRecord]
    jobs: dict[str, Job]

    def threads(self) -> dict[str, list[TurnRecord]]:
        """Each job's records, in storage order, threads in order of their first record."""
        threads: dict[str, list[TurnRecord]] = {}
        for record in self.records:
            threads.setdefault(record.job, []).append(record)
        return threads

    def parent(self, job: str, threads: dict[str, list[TurnRecord]]) -> str | None:
        """The thread ``job``'s thread hangs under: its job's parent, else the thread its first
        record depends on, else the root's (None for the root)."""
        if job == self.root:
            return None
        known = self.jobs.get(job)
        if known is not None and known.parent_id in threads:
            return known.parent_id
        where = {r.id: r.job for r in self.records}
        for dep in threads[job][0].depends_on:
            if where.get(dep, job) != job:
                return where[dep]
        return self.root if self.root in threads else None


def _thread_label(weave: JobWeave, job: str, records: Sequence[TurnRecord]) -> str:
    agent = records[0].agent if records else "?"
    known = weave.jobs.get(job)
    origin = f", {escape(known.origin)}" if known is not None and known.parent_id is not None else ""
    state = f" {_state(known.state)}" if known is not None else ""
    return f"job [bold]{escape(job)}[/] ({escape(agent)}{origin}){state}"


def render(weave: JobWeave, *, thoughts: bool) -> tuple[Tree, int]:
    """The weave as a tree: a node per thread (children under their parent's), a line per
    record; and how many THOUGHT records were left out (all of them unless ``thoughts``)."""
    threads = weave.threads()
    children: dict[str | None, list[str]] = {}
    for job in threads:
        children.setdefault(weave.parent(job, threads), []).append(job)
    hidden = 0 if thoughts else sum(1 for r in weave.records if r.type is RecordType.THOUGHT)
    count = f"{len(weave.records)} record(s) in {len(threads)} thread(s)"
    tree = Tree(f"weave of job [bold]{escape(weave.root)}[/]: {count}")

    def add(node: Tree, job: str) -> None:
        branch = node.add(_thread_label(weave, job, threads[job]))
        for record in threads[job]:
            if thoughts or record.type is not RecordType.THOUGHT:
                branch.add(record_line(record))
        for child in children.get(job, []):
            add(branch, child)

    for top in children.get(None, []):
        add(tree, top)
    return tree, hidden


# -- the verbs ---------------------------------------------------------------------------------------------


def audit(target: Target, job_id: str, *, thoughts: bool, as_json: bool) -> None:
    """Print the turn records of ``job_id``'s tree (THOUGHT records only with ``thoughts``)."""

    async def work(client: ControllerClient) -> JobWeave:
        root, records = await client.weave(job_id)
        jobs: dict[str, Job] = {}
        for job in dict.fromkeys(r.job for r in records):
            with contextlib.suppress(ControllerError):
                jobs[job] = await client.get(job)
        return JobWeave(root, records, jobs)

    weave = _with_client(target, as_json, work)
    hidden_note = "{n} thought record(s) hidden (show them with --thoughts)"
    if as_json:
        shown = [r for r in weave.records if thoughts or r.type is not RecordType.THOUGHT]
        print(json.dumps([r.model_dump(mode="json") for r in shown]))
        if len(shown) < len(weave.records):
            err_console.print(hidden_note.format(n=len(weave.records) - len(shown)), highlight=False)
        return
    if not weave.records:
        console.print(f"[dim]job {escape(job_id)} has no turn records yet[/]", highlight=False)
        return
    tree, hidden = render(weave, thoughts=thoughts)
    console.print(tree, highlight=False, soft_wrap=True)
    if hidden:
        console.print(f"[dim]{hidden_note.format(n=hidden)}[/]", highlight=False)


#: What an intact chain without anchors cannot show.
NO_ANCHORS = "no thread anchors (a tree recorded before them): records cut from a thread's end would not show"


def verify(target: Target, job_id: str, as_json: bool) -> None:
    """Check the hash chain (and seals) of ``job_id``'s tree; exit 0 when intact, else 1."""

    async def work(client: ControllerClient) -> tuple[str, ChainReport, bool]:
        return await client.verify(job_id)

    root, report, sealed = _with_client(target, as_json, work)
    code = EXIT_OK if report.ok else EXIT_INCOMPLETE
    if as_json:
        body = {
            "root": root,
            "ok": report.ok,
            "records": report.records,
            "sealed": sealed,
            "anchored": report.anchored,
            "anchored_records": report.anchored_records,
            "breaks": [b.model_dump(mode="json") for b in report.breaks],
        }
        print(json.dumps(body))
        raise typer.Exit(code)
    tree = "" if root == job_id else f" [dim](the tree of job {escape(root)})[/]"
    if report.ok:
        how = "sealed" if sealed else "hash chain only"
        how += ", every thread at its anchor" if report.anchored else ""
        console.print(f"chain intact: {report.records} records, {how}{tree}", highlight=False)
        if not report.anchored and report.records:
            console.print(f"[dim]{NO_ANCHORS}[/]", highlight=False)
        raise typer.Exit(code)
    console.print(
        f"[bold red]chain broken[/]: {len(report.breaks)} problem(s) in {report.records} records{tree}",
        highlight=False,
    )
    for b in report.breaks:
        console.print(
            f"  #{b.position} {escape(b.record_id)}: {escape(b.problem)}", highlight=False, soft_wrap=True
        )
    raise typer.Exit(code)

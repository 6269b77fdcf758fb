"""The controller service's client verbs: ``airlock submit`` and ``airlock jobs …``.

Each verb opens a :class:`ControllerClient` to ``--address`` with ``--token`` (both resolved
as :func:`resolve_token` and the client do: flag, environment, token file), makes its calls
in one event loop, and maps a :class:`ControllerError` to an exit code. Following a job
(``submit --wait``, ``jobs watch``) replays its recorded events and then shows the live ones
with the same progress lines as ``airlock run``; Ctrl-C stops watching and leaves the job
running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, assert_never, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from airlock.errors import AirlockError
from airlock.jobs import (
    ApprovalChanged,
    ChildJobChanged,
    ControllerClient,
    ControllerError,
    EffectApplied,
    FixedPointRun,
    Job,
    JobEvent,
    JobFilter,
    JobResumed,
    JobState,
    LogLine,
    SandboxActivity,
    SignalRecorded,
    StateChanged,
    TreeBudgetChanged,
    TreeBudgetUse,
    WorkspaceChanged,
)
from airlock.turn import Checkpoint, SignalDelivered, TurnSuspended
from layer0 import Layer0Error

from ._agents import format_ms
from ._common import (
    EXIT_CANCELLED,
    EXIT_ENV,
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_TURN,
    EXIT_USAGE,
    console,
    describe_reason,
    err_console,
    exit_code_for_error,
    exit_code_for_reason,
    fail,
    on_stop_signals,
    report_error,
)
from ._render import approval_rows, call_line, decision_text, fixed_point_text
from ._run import RunView, _print_result, summary_of

if TYPE_CHECKING:
    from airlock.config import AgentConfig

T = TypeVar("T")

#: Client call failures: the ControllerError code → exit code (others: 4).
_CODE_EXITS = {
    "NOT_FOUND": EXIT_USAGE,
    "INVALID_ARGUMENT": EXIT_USAGE,
    "UNAUTHENTICATED": EXIT_USAGE,
    "PERMISSION_DENIED": EXIT_USAGE,
    "FAILED_PRECONDITION": EXIT_USAGE,
    "UNAVAILABLE": EXIT_ENV,
    "DEADLINE_EXCEEDED": EXIT_ENV,
    "CANCELLED": EXIT_ENV,
}

#: Error kinds of a failed job that mean the sandbox could not be provided (exit 3).
_ENV_ERROR_KINDS = frozenset(
    {"provision_failed", "isolation_violation", "credential_failed", "resource_exceeded"}
)

_STATE_COLOURS = {
    JobState.QUEUED: "cyan",
    JobState.PROVISIONING: "cyan",
    JobState.RUNNING: "blue",
    JobState.APPLYING_EFFECTS: "blue",
    JobState.SUCCEEDED: "green",
    JobState.FAILED: "red",
    JobState.CANCELLED: "yellow",
    JobState.TIMED_OUT: "yellow",
    JobState.INTERRUPTED: "yellow",
    JobState.AWAITING_APPROVAL: "magenta",
}


@dataclass(frozen=True)
class Target:
    """Which controller to talk to: ``address`` (None: $AIRLOCK_CONTROLLER, else the default)
    and ``token`` (None: $AIRLOCK_TOKEN, else the token file)."""

    address: str | None = None
    token: str | None = None


# -- errors and exit codes -----------------------------------------------------------------------


def controller_exit_code(error: ControllerError) -> int:
    """2 for NOT_FOUND / INVALID_ARGUMENT / UNAUTHENTICATED / PERMISSION_DENIED /
    FAILED_PRECONDITION, 3 for UNAVAILABLE, else 4."""
    return _CODE_EXITS.get(error.code, EXIT_TURN)


def _controller_failure(error: ControllerError, as_json: bool) -> NoReturn:
    code = controller_exit_code(error)
    if as_json:
        print(json.dumps({"error": {"code": error.code, "message": str(error)}, "exit_code": code}))
    fail(f"{error} [{error.code}]", code)


def _other_failure(error: AirlockError | Layer0Error, as_json: bool) -> NoReturn:
    if as_json:
        body = {"error": {"type": type(error).__name__, "message": str(error)}}
        print(json.dumps({**body, "exit_code": exit_code_for_error(error)}))
    report_error(error)


def _with_client(target: Target, as_json: bool, work: Callable[[ControllerClient], Awaitable[T]]) -> T:
    """``work(client)`` in a fresh event loop; controller errors exit with their code."""
    from airlock.jobs import resolve_token

    try:
        token = resolve_token(target.token)

        async def main() -> T:
            async with ControllerClient(target.address, token) as client:
                return await work(client)

        return asyncio.run(main())
    except ControllerError as e:
        _controller_failure(e, as_json)
    except (AirlockError, Layer0Error) as e:
        _other_failure(e, as_json)


def job_exit_code(job: Job) -> int:
    """The exit code for a finished job (see ``airlock.cli.JOB_EXIT_CODES_HELP``)."""
    if job.output is not None and job.state is JobState.SUCCEEDED:
        return exit_code_for_reason(job.output.exit_reason)
    if job.state is JobState.TIMED_OUT:
        return EXIT_INCOMPLETE
    if job.state is JobState.CANCELLED:
        return EXIT_CANCELLED
    if job.state is JobState.INTERRUPTED:
        return EXIT_ENV
    if job.state is JobState.FAILED:
        kind = job.error.kind if job.error is not None else ""
        return EXIT_ENV if kind in _ENV_ERROR_KINDS else EXIT_TURN
    return EXIT_ENV  # pragma: no cover - only terminal jobs are asked about


# -- formatting ------------------------------------------------------------------------------------


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _ms_between(start: datetime | None, end: datetime | None) -> int | None:
    if start is None:
        return None
    return max(0, int(((end or datetime.now(UTC)) - start).total_seconds() * 1000))


def _duration(job: Job) -> str:
    """How long the job ran (or has been running, with ``…``); ``-`` if it never started."""
    ms = _ms_between(job.started_at, job.finished_at)
    if ms is None:
        return "-"
    text = format_ms(ms) if ms < 1000 else f"{ms / 1000:.1f}s"
    return text if job.finished_at is not None else text + "…"


def _state(state: JobState) -> str:
    return f"[{_STATE_COLOURS.get(state, 'white')}]{state.value}[/]"


def _outcome(job: Job) -> str:
    """The exit reason of the turn, or the error kind, or ``-``."""
    if job.output is not None:
        return describe_reason(job.output.exit_reason)
    if job.error is not None:
        return job.error.kind
    return "-"


def _origin(job: Job) -> str:
    return job.origin if job.parent_id is None else f"{job.origin} ← {job.parent_id}"


def _dump(job: Job) -> dict[str, Any]:
    return job.model_dump(mode="json")


def _walk_outcomes(report: Any) -> list[dict[str, Any]]:
    """Every outcome of an EffectReport (as JSON), follow-ups included, depth first."""
    found: list[dict[str, Any]] = []
    if not isinstance(report, dict):
        return found
    for outcome in report.get("outcomes") or []:
        if isinstance(outcome, dict):
            found.append(outcome)
            found.extend(_walk_outcomes(outcome.get("follow_up")))
    return found


def effects_summary(job: Job) -> dict[str, Any] | None:
    """Counts of the job's effect outcomes by status, and the outcomes (None before effects)."""
    if job.effects is None:
        return None
    outcomes = _walk_outcomes(job.effects)
    counts = Counter(str(o.get("status")) for o in outcomes)
    return {
        "total": len(outcomes),
        "by_status": dict(counts),
        "outcomes": [
            {k: o.get(k) for k in ("index", "effect", "status", "agent", "detail") if o.get(k) is not None}
            for o in outcomes
        ],
    }


# -- following a job -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteAgent:
    """What the controller says about an agent (``ListAgents``)."""

    name: str
    backend: str = "?"
    provider: str = "?"
    model: str | None = None
    #: Its model is served on the controller's machine (costs read ``$0 (local)``).
    local_model: bool = False


class JobView(RunView):
    """Live progress of one controller job, from its recorded events (replayed, then live)."""

    def __init__(self, out: Console | None, job: Job, agent: RemoteAgent) -> None:
        # RunView reads its agent only in provisioning() (overridden here) and summary_of()
        # reads only .name and .backend, which RemoteAgent has.
        super().__init__(out, cast("AgentConfig", agent), local=agent.local_model)
        self.job = job
        self.remote = agent
        self._provisioning_at: datetime | None = None
        self._event_at: datetime | None = None
        #: Also receives each event as it arrives (``jobs watch --json``: one line each).
        self.echo: Callable[[JobEvent], None] | None = None

    def provisioning(self) -> None:
        """The job left the queue: a sandbox is being provisioned."""
        a = self.remote
        self.line(
            f"[bold]{escape(a.name)}[/]: provisioning a {escape(a.backend)} sandbox "
            f"([dim]{escape(a.provider)}/{escape(a.model or '-')}[/])"
        )
        self.status("provisioning the sandbox…")

    def _on_started(self, _event: Any) -> None:
        if self._provisioning_at is not None and self._event_at is not None:
            seconds = (self._event_at - self._provisioning_at).total_seconds()
            self.line(f"[green]✓[/] sandbox ready in {seconds:.1f}s")
        else:
            self.line("[green]✓[/] sandbox ready")
        self.status("turn started")

    async def job_event(self, event: JobEvent) -> None:
        """Show one recorded event of the job."""
        if self.echo is not None:
            self.echo(event)
        self._event_at = event.time
        data = event.data
        match data:
            case StateChanged():
                self._on_state(data)
            case SandboxActivity():
                await self.sink(data.event)
            case LogLine():
                self._log_line(data)
            case EffectApplied():
                self._on_effect(data)
            case ChildJobChanged():
                self._on_child(data)
            case SignalRecorded():
                self.line(f"[cyan]signal[/] {escape(data.signal_type)} → {escape(data.target)}")
            case ApprovalChanged():
                self._on_approval(data)
            case JobResumed():
                self._on_resume(data)
            case WorkspaceChanged():
                self._on_workspace(data)
            case TreeBudgetChanged():
                colour = "yellow" if data.decision == "continue" else "red"
                text = escape(tree_budget_text(data))
                self.line(f"[{colour}]tree budget {data.decision}[/]: {text}: {escape(data.reason)}")
            case _:
                assert_never(data)

    def _on_workspace(self, data: WorkspaceChanged) -> None:
        if data.phase == "stopped":
            self.line(f"[yellow]workspace snapshots stopped[/]: {escape(data.reason or '')}")
        elif data.phase == "restored":
            self.line(f"[dim]workspace restored: {data.files} file(s), {data.bytes} bytes[/]")

    def _on_state(self, data: StateChanged) -> None:
        state = data.state
        if state is JobState.QUEUED:
            self.line(f"job [bold]{escape(self.job.id)}[/] queued")
            self.status("queued: waiting for a worker…")
        elif state is JobState.PROVISIONING:
            self._provisioning_at = self._event_at
            self.provisioning()
        elif state is JobState.APPLYING_EFFECTS:
            self.status("applying effects…")
        elif state is JobState.AWAITING_APPROVAL:
            self.status("waiting for approval…")
        elif state.terminal:
            self.stop()
            why = data.error.message if data.error is not None else data.detail
            mark = "[green]✓[/]" if state is JobState.SUCCEEDED else "[red]✗[/]"
            tail = f": {escape(why)}" if why else ""
            self.line(f"{mark} job {escape(self.job.id)} {_state(state)}{tail}")

    def _log_line(self, data: LogLine) -> None:
        self.line(f"[dim]log {escape(data.level.value)} ({escape(data.source)}): {escape(data.message)}[/]")

    def _on_effect(self, data: EffectApplied) -> None:
        outcome = data.outcome
        colour = "green" if outcome.status == "ok" else "yellow"
        parts = [f"[cyan]effect[/] {escape(outcome.effect)} [{colour}]{escape(outcome.status)}[/]"]
        if outcome.agent is not None:
            parts.append(f"→ {escape(str(outcome.agent))}")
        if outcome.detail:
            parts.append(f"[dim]{escape(outcome.detail)}[/]")
        self.line(" ".join(parts))

    def _on_approval(self, data: ApprovalChanged) -> None:
        job = escape(self.job.id)
        if data.phase == "requested":
            for call in data.calls:
                self.line(f"[magenta]approval[/] requested for {call_line(call)}")
            self.line(f"[dim]decide with: airlock approve {job} / airlock reject {job} --reason TEXT[/]")
        elif data.phase == "decided" and data.decision is not None:
            self.line(f"[magenta]approval[/] {decision_text(data.decision)}")
        elif data.outcome is not None:
            colour = "green" if data.outcome == "approved" else "red"
            self.line(f"[magenta]approval[/] resolved: [{colour}]{data.outcome}[/]; the job resumes")

    def _on_resume(self, data: JobResumed) -> None:
        self.line(
            f"[yellow]resume[/] {data.resume} ({escape(data.cause)}): {escape(data.reason)}; "
            f"continuing after model call {data.iteration}"
        )
        for lost in data.lost_calls:
            self.line(f"  [dim]lost call {escape(lost)}[/]")

    def _on_suspended(self, event: TurnSuspended) -> None:
        names = ", ".join(c.name for c in event.calls) or "no calls"
        self.line(
            f"[magenta]suspended[/] after model call {event.iteration}: {escape(names)} wait for approval"
        )

    def _on_signal(self, event: SignalDelivered) -> None:
        detail = f" [dim]{escape(event.detail)}[/]" if event.detail else ""
        self.line(
            f"[cyan]signal[/] {escape(event.signal_type)} reached the turn: {escape(event.action)}{detail}"
        )

    def _on_checkpoint(self, event: Checkpoint) -> None:
        self.line(f"[dim]checkpoint (iteration {event.state.get('iterations', '?')})[/]")

    def _on_child(self, data: ChildJobChanged) -> None:
        head = f"[cyan]child[/] job {escape(data.job)} ({escape(data.agent)}, {escape(data.origin)})"
        if data.phase == "started":
            self.line(f"{head} started")
            self.status(f"waiting for child job {escape(data.job)}…")
        else:
            state = data.state.value if data.state is not None else "?"
            self.line(f"{head} finished: {escape(state)}")


async def _agent_of(client: ControllerClient, name: str) -> RemoteAgent:
    for info in await client.agents():
        if info.get("name") == name:
            return RemoteAgent(
                name=name,
                backend=str(info.get("backend") or "?"),
                provider=str(info.get("provider") or "?"),
                model=str(info["model"]) if info.get("model") else None,
                local_model=info.get("local_model") is True,
            )
    return RemoteAgent(name=name)


async def _follow(client: ControllerClient, view: JobView) -> Job:
    """Show the job's events until it is terminal; the final job.

    The watch stream ends at the terminal ``state`` event; log lines recorded after it (the
    controller's note on a job it interrupted at restart) are fetched once more.
    """
    seq = 0
    job_id = view.job.id
    try:
        async for event in client.watch(job_id):
            seq = event.seq
            await view.job_event(event)
    except ControllerError as e:
        if e.code not in ("UNAVAILABLE", "CANCELLED"):
            raise
        raise ControllerError(
            e.code,
            f"lost the controller at {client.address} while watching job {job_id} (it stopped or "
            f"became unreachable; a stopped controller interrupts its running jobs); once it is "
            f"back: airlock jobs show {job_id}",
        ) from None
    for event in await client.logs(view.job.id, after_seq=seq):
        await view.job_event(event)
    return await client.get(view.job.id)


async def _follow_until_signal(client: ControllerClient, view: JobView) -> Job | None:
    """:func:`_follow`, stopped (None) by SIGINT/SIGTERM; the job itself is left alone."""
    task = asyncio.ensure_future(_follow(client, view))
    stopped = False

    def on_signal() -> None:
        nonlocal stopped
        stopped = True
        task.cancel()

    try:
        with on_stop_signals(on_signal):
            await asyncio.wait([task])
    finally:
        view.stop()
    if stopped or task.cancelled():
        if not task.cancelled():
            with contextlib.suppress(BaseException):
                task.exception()
        return None
    return task.result()


def job_summary(job: Job, view: JobView | None = None) -> dict[str, Any]:
    """The summary printed after a job's answer (``airlock run``'s, plus the job's facts)."""
    code = job_exit_code(job)
    facts: dict[str, Any] = {
        "job": job.id,
        "state": job.state.value,
        "exit_code": code,
        "queued_ms": _ms_between(job.created_at, job.started_at),
    }
    if job.error is not None:
        facts["error"] = job.error.model_dump(mode="json")
    effects = effects_summary(job)
    if effects is not None:
        facts["effects"] = effects["by_status"]
    if job.output is None:
        return {"agent": job.agent, **facts}
    wall_ms = _ms_between(job.created_at, job.finished_at) or 0
    agent = view.remote if view is not None else RemoteAgent(job.agent)
    base = summary_of(cast("AgentConfig", agent), job.output, code, wall_ms / 1000, view)
    return {**base, **facts}


def _print_job_end(job: Job, summary: dict[str, Any]) -> None:
    if job.output is not None:
        _print_result(job.output, summary)
        if job.state is not JobState.SUCCEEDED:
            console.print(f"job {escape(job.id)}: {_state(job.state)}", highlight=False)
        return
    colour = _STATE_COLOURS.get(job.state, "white")
    kind = f" ({job.error.kind})" if job.error is not None and job.error.kind != job.state.value else ""
    err_console.print(
        f"[bold {colour}]job {escape(job.id)} ended {job.state.value}[/]{escape(kind)} "
        f"(exit code {summary['exit_code']})",
        highlight=False,
        soft_wrap=True,
    )


@dataclass
class _Followed:
    job: Job | None
    view: JobView


def _progress_console(as_json: bool) -> Console | None:
    if as_json:
        return err_console if sys.stderr.isatty() else None
    return console


def _finish_following(followed: _Followed, job_id: str, as_json: bool) -> NoReturn:
    """Print the end of a followed job (or that watching stopped) and exit with its code."""
    job = followed.job
    if job is None:
        hint = f"airlock jobs cancel {job_id}"
        if as_json:
            print(json.dumps({"job_id": job_id, "watching": "stopped", "exit_code": EXIT_CANCELLED}))
        err_console.print(
            f"[yellow]stopped watching[/]: job {escape(job_id)} keeps running on the controller "
            f"(watch it again with airlock jobs watch {escape(job_id)}; cancel it with {escape(hint)})",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_CANCELLED)
    summary = job_summary(job, followed.view)
    code = summary["exit_code"]
    if as_json:
        print(json.dumps({"job": _dump(job), "summary": summary, "exit_code": code}))
    else:
        _print_job_end(job, summary)
    raise typer.Exit(code)


# -- the verbs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubmitOptions:
    """What ``airlock submit`` was asked for."""

    agent: str
    message: str
    session: str | None = None
    queue: str | None = None
    timeout: str | None = None
    wait: bool = False
    as_json: bool = False
    #: Run until stable: ``(max_iterations, cycle window)``; None: one turn.
    until_stable: tuple[int, int] | None = None
    #: Files and directories placed in the job's workspace (``--in``).
    inputs: tuple[Path, ...] = ()
    #: The long-lived sandbox it runs in (``--sandbox``).
    sandbox: str | None = None


def _max_duration(timeout: str | None) -> int | None:
    from airlock.config import parse_duration

    if timeout is None:
        return None
    try:
        return parse_duration(int(timeout) if timeout.isdigit() else timeout)
    except ValueError as e:
        fail(f"--timeout {timeout!r}: {e}", EXIT_USAGE)


def submit(target: Target, opts: SubmitOptions) -> None:
    """Submit a job; with ``wait``, follow it and exit with its code."""
    from layer0 import SessionId, TurnInput

    max_ms = _max_duration(opts.timeout)
    until_stable = None
    if opts.until_stable is not None:
        until_stable = FixedPointRun(max_iterations=opts.until_stable[0], window=opts.until_stable[1])
    turn_input = TurnInput.new(opts.message, session=SessionId(opts.session) if opts.session else None)
    out = _progress_console(opts.as_json)
    files = _read_inputs(opts.inputs, opts.as_json)

    async def work(client: ControllerClient) -> _Followed:
        job = await client.submit(
            opts.agent,
            turn_input,
            queue=opts.queue,
            max_duration_ms=max_ms,
            until_stable=until_stable,
            files=files,
            sandbox=opts.sandbox,
        )
        if not opts.wait:
            return _Followed(job, JobView(None, job, RemoteAgent(job.agent)))
        view = JobView(out, job, await _agent_of(client, job.agent))
        view.line(f"submitted job [bold]{escape(job.id)}[/] to {escape(client.address)}")
        return _Followed(await _follow_until_signal(client, view), view)

    try:
        followed = _with_client(target, opts.as_json, work)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/] (a job may have been submitted: see airlock jobs ls)")
        raise typer.Exit(EXIT_CANCELLED) from None
    if opts.wait:
        job_id = followed.view.job.id
        _finish_following(followed, job_id, opts.as_json)
    job = followed.job
    assert job is not None
    if opts.as_json:
        print(json.dumps({"job": _dump(job)}))
        return
    print(job.id, flush=True)
    err_console.print(
        f"[dim]queued for {escape(job.agent)}; follow it with: airlock jobs watch {escape(job.id)}[/]",
        highlight=False,
        soft_wrap=True,
    )


def _read_inputs(paths: tuple[Path, ...], as_json: bool) -> list[tuple[str, bytes]]:
    from airlock.policy import FileRefused

    from ._files import read_inputs

    try:
        return read_inputs(paths)
    except (FileRefused, OSError) as e:
        if as_json:
            error = {"type": type(e).__name__, "message": str(e)}
            print(json.dumps({"error": error, "exit_code": EXIT_USAGE}))
        fail(str(e), EXIT_USAGE)


def jobs_artifacts_verb(target: Target, job_id: str, download: Path | None, as_json: bool) -> None:
    """List the job's artifacts, or write them below ``download``."""
    from ._files import fetch_artifacts

    async def work(client: ControllerClient) -> list[dict[str, Any]]:
        return await fetch_artifacts(client, job_id, download)

    rows = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"job": job_id, "artifacts": rows}))
        return
    if not rows:
        err_console.print(f"[dim]job {escape(job_id)} has no artifacts[/]", highlight=False)
        return
    table = Table("path", "bytes", "sha256", *(["written to"] if download is not None else []))
    for row in rows:
        table.add_row(
            escape(row["path"]),
            str(row["size"]),
            row["sha256"][:16],
            *([escape(row["written"])] if download is not None else []),
        )
    console.print(table)


def _event_line(event: JobEvent) -> None:
    """One event as a JSON line on stdout, at once."""
    print(json.dumps({"event": event.model_dump(mode="json")}), flush=True)


def jobs_watch(target: Target, job_id: str, as_json: bool) -> None:
    """Follow a job (its recorded events, then live ones) and exit with its code; with
    ``as_json``, one ``{"event": …}`` line per event as it arrives, then the final document."""
    out = _progress_console(as_json)

    async def work(client: ControllerClient) -> _Followed:
        job = await client.get(job_id)
        view = JobView(out, job, await _agent_of(client, job.agent))
        view.echo = _event_line if as_json else None
        return _Followed(await _follow_until_signal(client, view), view)

    try:
        followed = _with_client(target, as_json, work)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_CANCELLED) from None
    _finish_following(followed, job_id, as_json)


def jobs_ls(
    target: Target,
    *,
    states: list[JobState],
    agent: str | None,
    session: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List jobs, most recent first."""
    where = JobFilter(states=frozenset(states), agent=agent, session=session, limit=limit)

    async def work(client: ControllerClient) -> list[Job]:
        return await client.find(where)

    jobs = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"jobs": [_dump(j) for j in jobs]}))
        return
    if not jobs:
        console.print("no jobs" + (" match" if states or agent or session else ""))
        return
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
    for column in ("id", "agent", "state", "origin", "created", "duration", "exit reason"):
        # Narrow terminals wrap the free-text columns; ids, states and times stay whole.
        whole = column in ("id", "agent", "state", "created", "duration")
        table.add_column(column, no_wrap=whole, overflow="fold", min_width=None if whole else 6)
    for job in jobs:
        table.add_row(
            escape(job.id),
            escape(job.agent),
            _state(job.state),
            escape(_origin(job)),
            _when(job.created_at),
            _duration(job),
            escape(_outcome(job)),
        )
    console.print(table)


def tree_budget_text(use: TreeBudgetUse | TreeBudgetChanged) -> str:
    """``$1.2 of $2, 300 of 1000 tokens, 4.0s of 10m0s; model cheaper`` (the limits set)."""
    cost = f"${use.spent.normalize():f}"
    parts = [f"{cost} of ${use.max_cost.normalize():f}" if use.max_cost is not None else f"{cost} spent"]
    if use.max_tokens is not None:
        parts.append(f"{use.tokens} of {use.max_tokens} tokens")
    if use.max_duration_ms is not None:
        parts.append(f"{format_ms(use.elapsed_ms)} of {format_ms(use.max_duration_ms)}")
    text = ", ".join(parts)
    return f"{text}; model {use.model}" if use.model else text


def jobs_show(target: Target, job_id: str, as_json: bool) -> None:
    """Every field of a job, its children, its error, its effects and its answer."""

    async def work(client: ControllerClient) -> tuple[Job, list[Job]]:
        job = await client.get(job_id)
        children = []
        for child_id in job.children:
            with contextlib.suppress(ControllerError):
                children.append(await client.get(child_id))
        return job, children

    job, children = _with_client(target, as_json, work)
    effects = effects_summary(job)
    if as_json:
        body = {
            "job": _dump(job),
            "children": [
                {"id": c.id, "agent": c.agent, "origin": c.origin, "state": c.state.value} for c in children
            ],
            "effects_summary": effects,
        }
        print(json.dumps(body))
        return
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    message = job.input.message.joined_text().strip()
    rows: list[tuple[str, str]] = [
        ("id", escape(job.id)),
        ("agent", escape(job.agent)),
        ("state", _state(job.state)),
        ("exit reason", escape(_outcome(job))),
        ("origin", escape(_origin(job))),
        ("queue", escape(job.queue)),
        ("workflow", escape(job.workflow)),
        ("session", escape(job.session or "-")),
        ("input", escape(message if len(message) <= 200 else message[:199] + "…")),
        ("created", _when(job.created_at)),
        ("started", _when(job.started_at)),
        ("finished", _when(job.finished_at)),
        ("queued for", format_ms(_ms_between(job.created_at, job.started_at or job.finished_at))),
        ("duration", _duration(job)),
        ("max duration", format_ms(job.max_duration_ms)),
    ]
    if job.error is not None:
        rows.append(("error", f"[red]{escape(job.error.kind)}[/]: {escape(job.error.message)}"))
    if job.resumes:
        rows.append(("resumes", str(job.resumes)))
    if job.approval is not None:
        rows.extend(approval_rows(job.approval, job.agent))
    if job.fixed_point is not None:
        rows.append(("fixed point", escape(fixed_point_text(job.fixed_point))))
    if job.tree_budget is not None:
        rows.append(
            ("tree budget", escape(f"{tree_budget_text(job.tree_budget)} ({job.tree_budget.decision})"))
        )
    if job.output is not None:
        m = job.output.metadata
        tools = Counter(t.name for t in m.tools_called)
        rows.append(("turns", str(m.turns_used)))
        rows.append(("tokens in / out", f"{m.tokens_in} / {m.tokens_out}"))
        rows.append(("cost", f"${m.cost.normalize():f}" if m.cost else "$0"))
        rows.append(("tools called", escape(", ".join(f"{n} x{c}" for n, c in tools.items()) or "none")))
    if children:
        rows.append(
            (
                "children",
                "\n".join(
                    f"{escape(c.id)} ({escape(c.agent)}, {escape(c.origin)}) {_state(c.state)}"
                    for c in children
                ),
            )
        )
    elif job.children:
        rows.append(("children", escape(", ".join(job.children))))
    if effects is not None:
        counts = ", ".join(f"{n} {status}" for status, n in effects["by_status"].items()) or "none"
        lines = [counts]
        for o in effects["outcomes"]:
            extra = f" → {o['agent']}" if o.get("agent") else ""
            detail = f": {o['detail']}" if o.get("detail") else ""
            lines.append(f"  #{o.get('index')} {o.get('effect')} {o.get('status')}{extra}{detail}")
        rows.append(("effects", escape("\n".join(lines))))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table, highlight=False)
    if job.output is not None:
        answer = job.output.message.joined_text().strip()
        console.rule("answer", style="dim")
        console.print(escape(answer) if answer else "[dim](no text in the answer)[/]", highlight=False)
        console.rule(style="dim")


def jobs_logs(target: Target, job_id: str, as_json: bool) -> None:
    """The job's log lines: time, level, source, message."""

    async def work(client: ControllerClient) -> list[JobEvent]:
        return await client.logs(job_id)

    lines = [(e, e.data) for e in _with_client(target, as_json, work) if isinstance(e.data, LogLine)]
    if as_json:
        body = [
            {
                "seq": event.seq,
                "time": event.time.isoformat(),
                "level": line.level.value,
                "source": line.source,
                "message": line.message,
                "data": line.data,
            }
            for event, line in lines
        ]
        print(json.dumps({"job": job_id, "lines": body}))
        return
    if not lines:
        console.print(f"[dim]job {escape(job_id)} has no log lines[/]", highlight=False)
        return
    for event, line in lines:
        when = event.time.astimezone().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        colour = {"error": "red", "warn": "yellow"}.get(line.level.value, "dim")
        extra = f" [dim]{escape(json.dumps(line.data, sort_keys=True))}[/]" if line.data else ""
        console.print(
            f"{when} [{colour}]{escape(line.level.value.upper()):5}[/] {escape(line.source)}: "
            f"{escape(line.message)}{extra}",
            highlight=False,
            soft_wrap=True,
        )


def jobs_fork(
    target: Target,
    job_id: str,
    at: str | None,
    message: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    """Start a new job from ``job_id``'s conversation and workspace at a checkpoint."""

    async def work(client: ControllerClient) -> Job:
        return await client.fork(job_id, at=at, message=message, agent=agent)

    job = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"job": _dump(job)}))
        raise typer.Exit(EXIT_OK)
    console.print(
        f"forked job {escape(job_id)} at {escape(job.fork_point or 'its last checkpoint')} "
        f"as job {escape(job.id)} (agent {escape(job.agent)}, {_state(job.state)})",
        highlight=False,
    )
    raise typer.Exit(EXIT_OK)


def jobs_cancel(target: Target, job_id: str, reason: str | None, as_json: bool) -> None:
    """Cancel a queued or running job (its sandbox is removed before this returns)."""

    async def work(client: ControllerClient) -> tuple[Job, Job]:
        before = await client.get(job_id)
        return before, await client.cancel(job_id, reason or "")

    before, after = _with_client(target, as_json, work)
    cancelled = not before.state.terminal and after.state is JobState.CANCELLED
    if as_json:
        print(json.dumps({"job": _dump(after), "cancelled": cancelled, "previous_state": before.state.value}))
        return
    if cancelled:
        removed = "; its sandbox was removed" if before.state is not JobState.QUEUED else ""
        console.print(
            f"cancelled job {escape(job_id)} (it was {before.state.value}){removed}",
            highlight=False,
        )
    elif before.state.terminal:
        console.print(
            f"job {escape(job_id)} had already finished ({_state(before.state)}); nothing to cancel",
            highlight=False,
        )
    else:
        console.print(f"job {escape(job_id)} is {_state(after.state)}", highlight=False)
    raise typer.Exit(EXIT_OK)

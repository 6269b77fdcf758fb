"""``airlock run``: one job, no server — live progress, the answer, a summary, an exit code.

The job runs as an asyncio task. SIGINT/SIGTERM cancel that task; the environment tears the
sandbox down on cancellation (shielded), and only then does the command exit with 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.status import Status
from rich.table import Table

from airlock.config import AgentConfig, AirlockConfig, parse_duration
from airlock.errors import SpecError
from airlock.turn import ToolRegistry
from layer0 import EnvError, SessionId, TurnConfig, TurnInput, TurnOutput

from ._agents import format_ms
from ._common import (
    EXIT_CANCELLED,
    EXIT_ENV,
    EXIT_USAGE,
    console,
    describe_reason,
    err_console,
    exit_code_for_error,
    exit_code_for_reason,
    fail,
    hint_for,
    on_stop_signals,
    report_error,
)
from ._render import lifecycle_line, preview
from ._run_controls import RunControls

if TYPE_CHECKING:
    from airlock.controller import AgentRunner, JobService


@dataclass(frozen=True)
class RunOptions:
    """What ``airlock run`` was asked for, besides the agent."""

    message: str
    session: str | None = None
    max_turns: int | None = None
    max_cost: str | None = None
    timeout: str | None = None
    as_json: bool = False
    #: Where the state store (session histories, memory) lives (None: the default data dir).
    data_dir: Path | None = None
    #: Pause before the first model call and take commands from stdin (``--step``).
    step: bool = False
    #: Who approvals typed at the terminal are made as (None: the OS user).
    approve_as: str | None = None
    #: Files and directories placed in the workspace before the turn (``--in``).
    inputs: tuple[Path, ...] = ()
    #: Where the job's artifacts are written (``--out``; None: listed, not kept).
    out: Path | None = None


def turn_config(opts: RunOptions) -> TurnConfig | None:
    """The per-turn overrides from the flags (None when no flag is given).

    Exits with 2 on an unparsable ``--max-cost`` or ``--timeout``.
    """
    cost: Decimal | None = None
    if opts.max_cost is not None:
        try:
            cost = Decimal(opts.max_cost.lstrip("$"))
        except InvalidOperation:
            fail(f"--max-cost {opts.max_cost!r} is not a number (USD, e.g. 0.50)", EXIT_USAGE)
        if not cost.is_finite() or cost < 0:
            fail(f"--max-cost must be a non-negative amount, not {opts.max_cost!r}", EXIT_USAGE)
    duration: int | None = None
    if opts.timeout is not None:
        try:
            duration = parse_duration(int(opts.timeout) if opts.timeout.isdigit() else opts.timeout)
        except ValueError as e:
            fail(f"--timeout {opts.timeout!r}: {e}", EXIT_USAGE)
    if opts.max_turns is None and cost is None and duration is None:
        return None
    return TurnConfig(max_turns=opts.max_turns, max_cost=cost, max_duration=duration)


def _money(value: Decimal | None, local: bool = False) -> str:
    """A cost as shown: ``?`` when unknown; a model served on this machine costs ``$0 (local)``
    (its calls carry no price, the turn's total is 0: both read the same)."""
    if local and not value:
        return "$0 (local)"
    return "?" if value is None else f"${value.normalize():f}" if value else "$0"


#: Characters of the model's text the live line keeps (it shows the last half, on one line).
LIVE_LINE_CHARS = 160


class RunView:
    """Live progress of one job on a console (or nothing, with ``console=None``)."""

    def __init__(self, out: Console | None, agent: AgentConfig, *, local: bool | None = None) -> None:
        self.out = out
        self.agent = agent
        #: The agent's model runs on this (or the controller's) machine: costs read ``$0 (local)``.
        self.local = agent.uses_local_model if local is None else local
        self._status: Status | None = None
        self._began = time.monotonic()
        self._ready_at: float | None = None
        self.total_cost = Decimal(0)
        #: The text the model is writing in the current call (the live line shows its end).
        self._live_text = ""
        self.egress = Counter[str]()
        #: host:port of every egress decision, in order of first appearance, with its verdict.
        self.destinations: dict[str, bool] = {}
        #: Credential-proxy requests (credential, method, upstream, path, status), in order.
        self.credential_requests: list[dict[str, Any]] = []
        #: The local model server used (model_id, base_url, pid, started), if any.
        self.local_model: dict[str, Any] | None = None
        #: The report of the effects applied after the turn (JSON), if any.
        self.effects: Any = None
        #: The job's artifacts: path, size, and where they were written (None: not kept).
        self.artifacts: list[dict[str, Any]] = []
        #: Why artifacts were refused or skipped (over a cap, a link, a special file).
        self.artifact_warnings: list[str] = []
        #: Tool calls refused before running (unknown tool, input outside the schema), and of
        #: those, how many sent a JSON schema as their input (a small model copying the tool's).
        self.refused_calls = 0
        self.schema_echoes = 0
        self._inputs: dict[str, Any] = {}

    # -- display primitives -----------------------------------------------------------------

    def money(self, value: Decimal | None) -> str:
        """A cost of this agent's model calls, as shown."""
        return _money(value, self.local)

    def line(self, text: str) -> None:
        """Print one progress line (markup allowed)."""
        if self.out is not None:
            self.out.print(text, highlight=False, soft_wrap=True)

    def status(self, text: str) -> None:
        """Show ``text`` on the spinner line (transient)."""
        if self.out is None:
            return
        if self._status is None:
            self._status = self.out.status(text, spinner="dots")
            self._status.start()
        else:
            self._status.update(text)

    def stop(self) -> None:
        """Remove the spinner."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    # -- phases ---------------------------------------------------------------------------------

    def provisioning(self) -> None:
        """Before the environment runs the turn."""
        self._began = time.monotonic()
        p = self.agent.spec.provider
        self.line(
            f"[bold]{escape(self.agent.name)}[/]: provisioning a {self.agent.backend} sandbox "
            f"([dim]{escape(p.kind)}/{escape(p.model or '-')}[/])"
        )
        self.status("provisioning the sandbox…")

    def cancelling(self) -> None:
        """After the first Ctrl-C."""
        self.status("cancelling: removing the sandbox…")
        self.line("[yellow]cancelling[/] (removing the sandbox first; a second Ctrl-C does not skip that)")

    async def sink(self, event: object) -> None:
        """The environment's event sink: turn events and proxy events, by ``type``."""
        kind = getattr(event, "type", None)
        handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
        if handler is not None:
            handler(event)

    # -- turn events ------------------------------------------------------------------------------

    def _on_started(self, _event: Any) -> None:
        self._ready_at = time.monotonic()
        self.line(f"[green]✓[/] sandbox ready in {self._ready_at - self._began:.1f}s")
        self.status("turn started")

    def _on_text_delta(self, event: Any) -> None:
        self._live_text = (self._live_text + event.text)[-LIVE_LINE_CHARS:]
        shown = " ".join(self._live_text.split())[-LIVE_LINE_CHARS // 2 :]
        self.status(f"model call {event.iteration} writing: [dim]…{escape(shown)}[/]")

    def _on_inference_started(self, event: Any) -> None:
        self._live_text = ""
        model = f" ({escape(event.model)})" if event.model else ""
        self.status(f"model call {event.iteration}{model}… cost so far {self.money(self.total_cost)}")

    def _on_inference_finished(self, event: Any) -> None:
        self.total_cost = event.total_cost
        self.line(
            f"[cyan]model[/] call {event.iteration}: {event.tokens_in} in / {event.tokens_out} out tokens, "
            f"{self.money(event.cost)} ({event.duration_ms} ms, {escape(event.stop_reason)}); "
            f"so far {event.total_tokens_in} in / {event.total_tokens_out} out, "
            f"{self.money(event.total_cost)}"
        )
        self.status(f"cost so far {self.money(self.total_cost)}")

    def _on_tool_started(self, event: Any) -> None:
        self._inputs[event.tool_use_id] = event.input
        self.line(f"[magenta]tool[/] {escape(event.name)} [dim]{escape(preview(event.input))}[/]")
        self.status(f"tool {escape(event.name)} running…")

    def _on_tool_finished(self, event: Any) -> None:
        sent = self._inputs.pop(event.tool_use_id, None)
        if not event.success and ToolRegistry.refused(event.output):
            self.refused_calls += 1
            echo = isinstance(sent, dict) and ("properties" in sent or sent.get("type") == "object")
            self.schema_echoes += echo
        mark = "[green]✓[/]" if event.success else "[red]✗[/]"
        tail = "" if event.success else f": [dim]{escape(preview(event.output))}[/]"
        self.line(f"  {mark} {escape(event.name)} {event.duration_ms} ms{tail}")
        self.status(f"cost so far {self.money(self.total_cost)}")

    def _on_log(self, event: Any) -> None:
        self.line(f"[dim]log {escape(event.level)}: {escape(event.message)}[/]")

    def _on_paused(self, event: Any) -> None:
        self.line(f"[yellow]paused[/] after iteration {event.iteration}")

    def _on_suspended(self, event: Any) -> None:
        names = ", ".join(c.name for c in event.calls)
        self.line(f"[yellow]waiting for approval[/] of {escape(names)} (the sandbox is released meanwhile)")
        self.status("waiting for approval…")

    def _on_signal(self, event: Any) -> None:
        detail = f": {escape(event.detail)}" if event.detail else ""
        self.line(f"[blue]signal[/] {escape(event.signal_type)} → {escape(event.action)}{detail}")

    def _on_compacted(self, event: Any) -> None:
        if event.cone_size is not None:
            self.line(
                f"[dim]context: causal cone of {event.cone_size} of {event.cone_total} records "
                f"(compression {event.compression_ratio:.2f})[/]"
            )
        else:
            self.line(f"[dim]context compacted: {event.messages_before} → {event.messages_after} messages[/]")

    def _on_lifecycle(self, event: Any) -> None:
        text = lifecycle_line(event)
        if text is not None:
            self.line(text)

    # -- proxy events (EgressEvent, CredentialProxyEvent) ----------------------------------------

    def _on_egress(self, event: Any) -> None:
        host = f"[{event.host}]" if ":" in event.host else event.host  # an IPv6 address
        where = f"{host}:{event.port}"
        if event.phase != "decision":
            self.line(
                f"[dim]egress closed {escape(where)} ↑{event.bytes_up or 0} B ↓{event.bytes_down or 0} B "
                f"({event.duration_ms or 0} ms)[/]"
            )
            return
        verdict = "[green]allowed[/]" if event.allowed else "[red]denied[/]"
        self.egress["allowed" if event.allowed else "denied"] += 1
        self.destinations[where] = self.destinations.get(where, False) or bool(event.allowed)
        self.line(f"[blue]egress[/] {verdict} {escape(where)} [dim]{escape(event.rule)}[/]")

    def _on_credential_proxy(self, event: Any) -> None:
        self.credential_requests.append(
            {
                "credential": event.credential,
                "method": event.method,
                "upstream": event.upstream,
                "path": event.path,
                "status": event.status,
            }
        )
        colour = "green" if 200 <= event.status < 400 else "red"
        self.line(
            f"[blue]credential[/] {escape(event.credential)}: {escape(event.method)} "
            f"{escape(event.upstream)}{escape(event.path)} → [{colour}]{event.status}[/] "
            f"({event.duration_ms} ms)"
        )


class _SetupProgress:
    """Rich progress bars for the local model's one-time set-up (ProgressEvent callback)."""

    def __init__(self, out: Console | None) -> None:
        self.progress = (
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[amount]}"),
                TimeElapsedColumn(),
                console=out,
                transient=False,
            )
            if out is not None
            else None
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> _SetupProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event: Any) -> None:
        if self.progress is None:
            return
        if event.unit == "bytes":
            done = f"{event.completed / 1e6:.0f}"
            amount = f"{done}/{event.total / 1e6:.0f} MB" if event.total else f"{done} MB"
        else:
            amount = f"{event.completed}/{event.total}" if event.total else str(event.completed)
        description = event.phase.replace("_", " ") + (f" {event.message}" if event.message else "")
        task = self.tasks.get(event.phase)
        if task is None:
            task = self.progress.add_task(description, total=event.total, amount=amount)
            self.tasks[event.phase] = task
        self.progress.update(
            task, completed=event.completed, total=event.total, description=description, amount=amount
        )


async def _job(
    config: AirlockConfig,
    agent: AgentConfig,
    opts: RunOptions,
    turn_config: TurnConfig | None,
    view: RunView,
    files: list[tuple[str, bytes]],
) -> TurnOutput:
    """The job, run by the controller's own service in this process: the same backend choice,
    local-model bring-up, state snapshot and effect application as ``airlock serve``, with
    the session history and memory in the state store of the data directory."""
    from airlock.controller import AgentRunner, JobService, SqliteJobStore, open_data_dir
    from airlock.jobs import default_data_dir
    from airlock.state import SqliteStore

    from ._tool_gate import refuse_broken_tools

    data_dir = (opts.data_dir or default_data_dir()).absolute()
    await asyncio.to_thread(open_data_dir, data_dir)
    await refuse_broken_tools(agent, data_dir)
    records = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="airlock-run-"))
    setup = _SetupProgress(view.out)
    controls = RunControls(None, view, step=opts.step, approver=opts.approve_as or getpass.getuser())

    async def observe(event: Any) -> None:
        await view.sink(event)
        await controls.event(event)

    runner = AgentRunner(config, sweep=True, progress=setup, observe=observe)
    try:
        async with (
            SqliteJobStore(records / "jobs.db") as store,
            SqliteStore(data_dir / "state.db") as state,
            JobService(store, runner, state) as service,
        ):
            if agent.uses_local_model:
                view.line("local model: checking the model and its runtime (one-time set-up may download)")
                view.stop()
                with setup:
                    await runner.prepare(agent)
                _show_local_model(view, runner)
            turn_input = TurnInput.new(
                opts.message, session=SessionId(opts.session) if opts.session else None, config=turn_config
            )
            controls.service = service
            if not controls.start() and opts.step:
                raise EnvError.other("--step reads its commands from stdin: run it on a terminal or a pipe")
            view.provisioning()
            job = await service.run(agent.name, turn_input, on_submitted=controls.attach, files=files)
            await _take_artifacts(service, job.id, opts.out, view)
            if job.output is None:
                message = job.error.message if job.error is not None else f"the job ended {job.state.value}"
                raise EnvError.other(message)
            view.effects = job.effects
            return job.output
    finally:
        controls.close()
        await asyncio.to_thread(shutil.rmtree, records, True)


async def _take_artifacts(service: JobService, job_id: str, out: Path | None, view: RunView) -> None:
    """The job's artifacts onto ``view``, written below ``out`` when given (the job store of
    ``airlock run`` is removed when it ends)."""
    from airlock.jobs import LogLine

    from ._files import fetch_artifacts

    view.artifacts = await fetch_artifacts(service, job_id, out)
    for event in await service.logs(job_id):
        line = event.data
        if not isinstance(line, LogLine) or not isinstance(line.data, dict):
            continue
        if "artifacts_refused" in line.data or "artifact_skipped" in line.data:
            view.artifact_warnings.append(line.message)


def _show_local_model(view: RunView, runner: AgentRunner) -> None:
    server = runner.local_model
    if server is None or server.info is None:
        return
    info = server.info
    how = "started" if server.started_here else "reusing"
    view.line(f"local model: {how} {escape(info.model_id)} at {escape(info.base_url)}")
    view.local_model = {
        "model_id": info.model_id,
        "base_url": info.base_url,
        "pid": info.pid,
        "started": server.started_here,
    }


@dataclass
class _Outcome:
    output: TurnOutput | None = None
    error: BaseException | None = None
    cancelled: bool = False


async def _supervise(job: Callable[[], Awaitable[TurnOutput]], view: RunView) -> _Outcome:
    """Run ``job`` as a task; SIGINT/SIGTERM cancel it and we wait for its teardown."""
    task = asyncio.ensure_future(job())
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            view.cancelling()
            task.cancel()

    try:
        with on_stop_signals(on_signal):
            await asyncio.wait([task])
    finally:
        view.stop()
    if task.cancelled() or signals:
        if not task.cancelled():
            with contextlib.suppress(BaseException):
                task.exception()
        return _Outcome(cancelled=True)
    error = task.exception()
    if error is not None:
        return _Outcome(error=error)
    return _Outcome(output=task.result())


def summary_of(
    agent: AgentConfig, output: TurnOutput, code: int, wall_s: float, view: RunView | None = None
) -> dict[str, Any]:
    """The small summary printed after the answer (and included in ``--json``).

    With ``view``, also what the sandbox's proxies reported (``network``: egress decisions by
    destination, credential-proxy requests by credential and upstream) and the local model
    server used (``local_model``).
    """
    m = output.metadata
    tools = Counter(t.name for t in m.tools_called)
    extra: dict[str, Any] = {}
    if view is not None:
        extra["network"] = {
            "egress_allowed": view.egress["allowed"],
            "egress_denied": view.egress["denied"],
            "destinations": dict(view.destinations),
            "credential_proxy": list(view.credential_requests),
        }
        if view.local_model is not None:
            extra["local_model"] = dict(view.local_model)
        if view.effects is not None:
            extra["effects"] = view.effects
        extra["tool_calls_refused"] = view.refused_calls
        extra["schema_echoes"] = view.schema_echoes
    return {
        "agent": agent.name,
        "backend": agent.backend,
        "exit_reason": describe_reason(output.exit_reason),
        "exit_code": code,
        "turns": m.turns_used,
        "tokens_in": m.tokens_in,
        "tokens_out": m.tokens_out,
        "cost": str(m.cost),
        "tools_called": dict(tools),
        "tool_failures": sum(1 for t in m.tools_called if not t.success),
        "duration_ms": m.duration,
        "wall_ms": int(wall_s * 1000),
        "local": view is not None and view.local,
        **extra,
    }


def _print_result(output: TurnOutput, summary: dict[str, Any]) -> None:
    answer = output.message.joined_text().strip()
    console.rule("answer", style="dim")
    console.print(escape(answer) if answer else "[dim](no text in the answer)[/]", highlight=False)
    console.rule(style="dim")
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    reason = summary["exit_reason"]
    colour = "green" if summary["exit_code"] == 0 else "yellow"
    tools = ", ".join(f"{name} x{n}" for name, n in summary["tools_called"].items()) or "none"
    if summary["tool_failures"]:
        refused = summary.get("tool_calls_refused", 0)
        tools += f" ({summary['tool_failures']} failed" + (f", {refused} refused)" if refused else ")")
    rows = [
        ("exit reason", f"[{colour}]{escape(reason)}[/]"),
        ("turns", str(summary["turns"])),
        ("tokens in / out", f"{summary['tokens_in']} / {summary['tokens_out']}"),
        ("cost", _money(output.metadata.cost, summary["local"])),
        ("tools called", escape(tools)),
        ("duration", f"{format_ms(summary['duration_ms'])} (wall {summary['wall_ms'] / 1000:.1f}s)"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def _json_error(error: BaseException, code: int) -> None:
    kind = getattr(error, "kind", None)
    body = {"error": {"type": type(error).__name__, "kind": kind, "message": str(error)}, "exit_code": code}
    hint = hint_for(error)
    if hint:
        body["error"]["hint"] = hint  # type: ignore[index]
    print(json.dumps(body))


def run_agent(config: AirlockConfig, agent: AgentConfig, opts: RunOptions) -> None:
    """Run one job for ``agent`` of ``config`` and exit with the documented code."""
    turn = turn_config(opts)
    try:  # fail before anything starts (the runner builds the running agent again per job)
        agent.running().with_inline_script()
    except SpecError as e:
        if opts.as_json:
            _json_error(e, exit_code_for_error(e))
        report_error(e)
    progress_console: Console | None = console
    if opts.as_json:
        progress_console = err_console if sys.stderr.isatty() else None
    view = RunView(progress_console, agent)
    files = _inputs(opts)
    began = time.monotonic()
    try:
        outcome = asyncio.run(_supervise(lambda: _job(config, agent, opts, turn, view, files), view))
    except KeyboardInterrupt:
        outcome = _Outcome(cancelled=True)
    wall = time.monotonic() - began
    if outcome.cancelled:
        if opts.as_json:
            print(json.dumps({"cancelled": True, "exit_code": EXIT_CANCELLED}))
        err_console.print("[yellow]cancelled[/]: the sandbox was removed")
        raise typer.Exit(EXIT_CANCELLED)
    if outcome.error is not None:
        if opts.as_json:
            _json_error(outcome.error, exit_code_for_error(outcome.error))
        report_error(outcome.error)
    output = outcome.output
    if output is None:  # pragma: no cover - a finished task has a result or an error
        fail("the job ended without an output", EXIT_ENV)
    code = exit_code_for_reason(output.exit_reason)
    summary = summary_of(agent, output, code, wall, view)
    if view.artifacts or view.artifact_warnings:
        summary["artifacts"] = view.artifacts
        summary["artifact_warnings"] = view.artifact_warnings
    if opts.as_json:
        print(json.dumps({"output": json.loads(output.model_dump_json()), "summary": summary}))
    else:
        _print_result(output, summary)
        _print_artifacts(view.artifacts, view.artifact_warnings)
    raise typer.Exit(code)


def _inputs(opts: RunOptions) -> list[tuple[str, bytes]]:
    """The ``--in`` files, read before the sandbox starts (a refusal exits with 2)."""
    from airlock.policy import FileRefused

    from ._files import read_inputs

    try:
        return read_inputs(opts.inputs)
    except (FileRefused, OSError) as e:
        if opts.as_json:
            _json_error(e, EXIT_USAGE)
        fail(str(e), EXIT_USAGE)


def _print_artifacts(artifacts: list[dict[str, Any]], warnings: list[str]) -> None:
    for warning in warnings:
        err_console.print(f"[yellow]{escape(warning)}[/]", highlight=False, soft_wrap=True)
    if not artifacts:
        return
    for a in artifacts:
        where = f" → {a['written']}" if a["written"] else ""
        err_console.print(
            f"[dim]artifact[/] {escape(a['path'])} ({a['size']} bytes){escape(where)}", highlight=False
        )
    if not artifacts[0]["written"]:
        err_console.print("[dim]artifacts are not kept: add --out DIR to write them[/]", highlight=False)

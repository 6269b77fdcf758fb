"""Interactive controls of an ``airlock run`` job, typed as lines on stdin while it runs.

``p`` pauses the turn at its next step boundary; while paused ``s`` runs exactly one step
(one model call and its tools) and ``r`` resumes; ``i`` shows the session (counters, the
open step's calls). With ``--step`` the turn pauses before its first model call. When the
turn stops before calls that need approval, ``y [comment]`` approves them and ``n reason``
rejects them, as the given approver. The lines go through the job service, the same calls
``airlock jobs pause|step|resume|inspect`` and ``airlock approve|reject`` make.

A line typed before the turn can take it waits for it (any line, until the job is submitted):
``p`` until the turn runs, ``s`` and
``r`` until a pause asked for (``--step`` or ``p``) has taken effect. When stdin ends while the
turn is paused, or is to be, it runs on (nobody is left to step it); approvals left open are
decided by the agent's approval timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import TYPE_CHECKING, Any, Protocol

from rich.markup import escape

from airlock.errors import AirlockError

from ._render import call_line

if TYPE_CHECKING:
    from airlock.controller import JobService


class Lines(Protocol):
    """Where the controls print their lines (the run's live view)."""

    def line(self, text: str) -> None:
        """Print one line (rich markup allowed)."""


HELP = (
    "keys (then Enter): p pause · s step · r resume · i inspect · "
    "y [comment] approve · n reason reject · ? help"
)


def stdin_fd() -> int | None:
    """The file descriptor of a readable stdin (a terminal or a pipe), else None."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if os.isatty(fd) or _is_pipe(fd) else None


def _is_pipe(fd: int) -> bool:
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class RunControls:
    """Reads command lines from stdin and applies them to the job.

    Args:
        service: the job service running the job.
        view: where replies are printed.
        step: pause before the first model call (``--step``).
        approver: the name approvals and rejections are made as.
    """

    def __init__(self, service: JobService | None, view: Lines, *, step: bool, approver: str) -> None:
        self._service = service
        self.view = view
        self.step = step
        self.approver = approver
        self.job_id: str | None = None
        self.awaiting = False
        self._fd: int | None = None
        self._buffer = b""
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        #: The job was submitted (a line typed before waits for it).
        self._attached = asyncio.Event()
        #: The turn has reported an event (it runs in its sandbox).
        self._running = asyncio.Event()
        #: The turn stopped at a step boundary and nothing moved it on since.
        self._paused = asyncio.Event()
        #: A pause was asked for (``--step`` or ``p``) and has not been undone by ``r``.
        self._pausing = step
        self._ended = False

    @property
    def service(self) -> JobService:
        """The job service (set once it runs)."""
        assert self._service is not None, "the job service is not running yet"
        return self._service

    @service.setter
    def service(self, service: JobService) -> None:
        self._service = service

    def start(self) -> bool:
        """Start reading stdin; False when there is none to read."""
        fd = stdin_fd()
        if fd is None:
            return False
        self._fd = fd
        asyncio.get_running_loop().add_reader(fd, self._readable)
        self.view.line(f"[dim]{escape(HELP)}[/]")
        return True

    def close(self) -> None:
        """Stop reading stdin and drop the commands not done yet."""
        self._stop_reading()
        for task in self._tasks:
            task.cancel()

    def _stop_reading(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            self._fd = None

    async def _run_on(self) -> None:
        """Stdin ended with the turn paused (or to be): let it run on."""
        await self._paused.wait()
        self.view.line("[dim]stdin ended while the turn was paused: it runs on[/]")
        await self.command("r")

    def attach(self, job_id: str) -> None:
        """The job was submitted (with ``--step``, its turn starts paused)."""
        self.job_id = job_id
        self._attached.set()
        if self.step and self._ended:
            self._pausing = False
            self.view.line("[dim]stdin ended before the turn started: it runs without pausing[/]")
        elif self.step:
            self.service.start_paused(job_id)

    async def event(self, event: object) -> None:
        """A sandbox event of the job (the run view's observer)."""
        kind = getattr(event, "type", None)
        self._running.set()
        if kind == "paused":
            self._paused.set()
        if kind == "suspended":
            self.awaiting = True
            calls = getattr(event, "calls", [])
            for call in calls:
                self.view.line(f"[yellow]approval needed[/]: {call_line(call)}")
            how = (
                "type y [comment] to approve or n reason to reject"
                if self._fd is not None
                else ("no stdin to answer on: the agent's approval timeout decides")
            )
            self.view.line(f"  as {escape(self.approver)}: {how}")
        elif kind == "paused":
            self.view.line("  [dim]paused: s step · r resume · i inspect[/]")

    # -- input ------------------------------------------------------------------------------------

    def _readable(self) -> None:
        assert self._fd is not None
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:  # end of input
            self._ended = True
            if self.job_id is not None and self._pausing:
                self._spawn(self._run_on())
            self._stop_reading()
            return
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._spawn(self.command(line.decode(errors="replace").strip()))

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(self._serial(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serial(self, work: Any) -> None:
        async with self._lock:  # one command at a time, in the order typed
            await work

    async def command(self, line: str) -> None:
        """Apply one typed line (once the job is submitted)."""
        if not line:
            return
        await self._attached.wait()
        assert self.job_id is not None
        key, _, rest = line.partition(" ")
        job = self.job_id
        try:
            await self._ready_for(key)
            if key == "p":
                await self.service.pause(job)
                self._pausing = True
            elif key == "r":
                self._paused.clear()
                await self.service.resume(job)
                self._pausing = False
            elif key == "s":  # the turn pauses again after its step
                info, _ = await self.service.step(job)
                tools = ", ".join(info.tools) or "no tools"
                text = f": {escape(info.text[:200])}" if info.text else ""
                done = " (the turn ended)" if info.complete else ""
                self.view.line(f"[cyan]step[/] ran {escape(tools)}{text}{done}")
            elif key == "i":
                await self._inspect(job)
            elif key in ("y", "n"):
                await self._decide(job, key == "y", rest)
            else:
                self.view.line(f"[dim]{escape(HELP)}[/]")
        except AirlockError as e:
            self.view.line(f"[red]{escape(key)}[/]: {escape(str(e))}")

    async def _ready_for(self, key: str) -> None:
        """Wait until the turn can take ``key``: running for ``p``; for ``s`` and ``r``, paused
        when a pause was asked for (else the service says why it cannot)."""
        if key == "p" and not self._running.is_set():
            self.view.line("[dim]p: waiting for the turn to start[/]")
            await self._running.wait()
        elif key in ("s", "r") and self._pausing and not self._paused.is_set():
            self.view.line(f"[dim]{key}: waiting for the turn to pause[/]")
            await self._paused.wait()

    async def _inspect(self, job: str) -> None:
        seen = await self.service.inspect(job)
        state = seen.state
        where = "paused" if seen.paused else "running" if seen.running else seen.job.state.value
        if state is None:
            self.view.line(f"[cyan]inspect[/] {where}: no checkpoint yet")
            return
        self.view.line(
            f"[cyan]inspect[/] {where}: {state.iterations} model call(s), {len(state.messages)} message(s), "
            f"{state.tokens_in} in / {state.tokens_out} out tokens, ${state.cost}, "
            f"{len(state.tool_records)} tool call(s)"
        )
        for call in seen.pending:
            self.view.line(f"  pending {call_line(call)}")

    async def _decide(self, job: str, approve: bool, text: str) -> None:
        from airlock.jobs import JobState

        for _ in range(600):  # the suspension is reported before the job is marked waiting
            if (await self.service.get(job)).state is not JobState.RUNNING:
                break
            await asyncio.sleep(0.05)
        if approve:
            done = await self.service.approve(job, self.approver, text)
        else:
            done = await self.service.reject(job, self.approver, text or "rejected at the terminal")
        self.awaiting = False
        verdict = "approved" if approve else "rejected"
        self.view.line(f"[green]{verdict}[/] as {escape(self.approver)}; the job is {done.state.value}")

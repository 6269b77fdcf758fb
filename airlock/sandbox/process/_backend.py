"""LocalProcessEnvironment: the runner as a local subprocess — the WEAKEST boundary.

What it isolates: the turn runs in its own OS process (own session / process group) with
its own private temporary workspace, reached over a Unix socket in a private 0700
directory with a one-time token, and is killed with its whole process group at the end,
on cancellation and on timeout.

What it does NOT isolate: the process runs as *your* user, with your filesystem, your
network and no resource limits. Any tool the agent runs (bash, files outside the
workspace via bash) can do what you can. Use it for trusted agents, development, and
machines without Docker; use DockerEnvironment for anything else. So that nothing is
silently weakened, specs asking for more than a process boundary (container/gvisor/micro_vm
isolation, a network policy, credentials or resource limits) are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import airlock
from airlock.policy import SecretResolver
from airlock.sandbox._events import SandboxEventSink
from airlock.sandbox._handle import TurnHandle
from airlock.sandbox._placement import refuse_placement
from airlock.sandbox._port import SandboxRequest
from airlock.sandbox._turn import hard_timeout_s, run_in_sandbox
from airlock.sandbox.process._leftovers import JOB_MARKER, stop_job_runners
from layer0 import (
    EnvError,
    EnvironmentSpec,
    ProcessIsolation,
    Scope,
    TurnError,
    TurnInput,
    TurnOutput,
)

if TYPE_CHECKING:
    from airlock.spec import AgentSpec

__all__ = ["ProcessBackend"]

_LOG_TAIL = 4000
_LOOPBACK = "127.0.0.1"
#: So the child imports this very airlock (a checkout need not be installed).
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(airlock.__file__)))
#: Environment variables the runner process inherits (nothing else: no API keys, no tokens).
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")


class ProcessBackend:
    """The process backend: each turn in a fresh local runner process (a :class:`~airlock.sandbox.Sandbox`).

    Args:
        python: the interpreter that runs ``-m airlock.runner`` (default: this one).
        start_timeout: seconds from spawn to health SERVING.
        turn_timeout: hard cap on a turn's wall-clock seconds (None: only max_duration).
        timeout_grace: extra seconds past ``max_duration`` before the process is killed.
        secrets: accepted for the registry's uniform factory; this backend injects no
            credentials (a spec naming some is refused), so it is never asked.
    """

    def __init__(
        self,
        *,
        python: str | None = None,
        start_timeout: float = 30.0,
        turn_timeout: float | None = None,
        timeout_grace: float = 5.0,
        secrets: SecretResolver | None = None,
    ) -> None:
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.turn_timeout = turn_timeout
        self.timeout_grace = timeout_grace

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a local runner process, killed (with its process group)
        before this returns; the state snapshot is sent with the turn's request.

        Raises:
            EnvError: ``isolation_violation`` / ``credential_failed`` / ``resource_exceeded``
                for a spec this backend cannot enforce; ``provision_failed`` when the runner
                does not start; ``turn_error`` for the turn's own failure (chained).
        """
        agent, input = request.agent, request.input
        _refuse_unenforceable(request.environment)
        refuse_placement(request.placement, "process")
        proc = ProcessInstance(self.python, request.job)
        try:
            await proc.start(agent, self.start_timeout, request.state)
            deadline = hard_timeout_s(agent, input, self.turn_timeout, self.timeout_grace)
            return await proc.execute(input, request.events, deadline, request.session)
        finally:
            await _shielded(proc.stop())

    async def host_address(self) -> str:
        """Loopback: the runner is a process of this host."""
        return _LOOPBACK

    async def ensure_gone(self, job: str) -> None:
        """Before ``job`` resumes: stop every runner process still serving it and confirm it
        exited (see :mod:`._leftovers`). A runner whose controller died stops by itself
        (``--exit-with-parent``); this catches one that has not yet.

        Raises:
            EnvError: ``provision_failed`` when one is still running after the wait.
        """
        await asyncio.to_thread(stop_job_runners, job)


def _refuse_unenforceable(spec: EnvironmentSpec) -> None:
    stronger = [b.type for b in spec.isolation if not isinstance(b, ProcessIsolation)]
    if stronger:
        raise EnvError.isolation_violation(
            f"LocalProcessEnvironment provides only a process boundary, but the spec asks for "
            f"{', '.join(stronger)}; use DockerEnvironment"
        )
    if spec.network is not None:
        raise EnvError.isolation_violation(
            "LocalProcessEnvironment cannot enforce a network policy (the process has the host's "
            "network); use DockerEnvironment"
        )
    if spec.credentials:
        names = ", ".join(c.name for c in spec.credentials)
        raise EnvError.credential_failed(f"LocalProcessEnvironment does not inject credentials: {names}")
    r = spec.resources
    if r is not None and any(v is not None for v in (r.cpu, r.memory, r.disk, r.gpu)):
        raise EnvError.resource_exceeded(
            "LocalProcessEnvironment cannot enforce resource limits; use DockerEnvironment"
        )


async def _shielded(coro: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coro)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


class ProcessInstance:
    def __init__(self, python: str, job: str | None = None) -> None:
        self.python = python
        self.job = job
        self.token = secrets.token_urlsafe(32)
        self.proc: asyncio.subprocess.Process | None = None
        self.base: Path | None = None
        self.remote: object = None

    async def start(
        self,
        agent: AgentSpec,
        timeout: float,  # noqa: ASYNC109
        state: Iterable[tuple[Scope, str, Any]] | None = None,
    ) -> None:
        from airlock.runner import RemoteTurn, RunnerCallError

        control, workspace, log = await asyncio.to_thread(self._prepare_dirs)
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env["HOME"] = str(workspace)
        if self.job is not None:
            env[JOB_MARKER] = self.job  # what ensure_gone finds it by
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
        with open(log, "wb") as out:  # noqa: ASYNC230 - a new local file, before the process exists
            self.proc = await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                "airlock.runner",
                "--listen",
                f"unix:{control / 'runner.sock'}",
                "--token-file",
                str(control / "token"),
                "--token-file-delete",
                "--workspace",
                str(workspace),
                "--exit-with-parent",
                str(os.getpid()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                cwd=workspace,
                start_new_session=True,
            )
        remote = RemoteTurn(f"unix:{control / 'runner.sock'}", self.token, agent, state=state)
        self.remote = remote
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.returncode is not None:
                await self._fail(f"the runner exited with code {self.proc.returncode}")
            try:
                await remote.wait_until_serving(min(0.25, max(0.01, deadline - time.monotonic())))
                return
            except RunnerCallError as e:
                if time.monotonic() >= deadline:
                    await self._fail(f"not SERVING after {timeout:.0f}s ({e})")

    def _prepare_dirs(self) -> tuple[Path, Path, Path]:
        self.base = Path(tempfile.mkdtemp(prefix="airlock-proc-"))  # 0700
        control, workspace = self.base / "control", self.base / "workspace"
        control.mkdir(mode=0o700)
        workspace.mkdir(mode=0o700)
        fd = os.open(control / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token)
        return control, workspace, self.base / "runner.log"

    async def _fail(self, why: str) -> None:
        log = ""
        if self.base is not None:
            path = self.base / "runner.log"
            with contextlib.suppress(OSError):
                log = (await asyncio.to_thread(path.read_bytes))[-_LOG_TAIL:].decode(errors="replace")
        raise EnvError.provision_failed(
            f"local runner did not become ready: {why}; its output:\n{log.strip()}"
        )

    async def execute(
        self,
        input: TurnInput,
        events: SandboxEventSink | None,
        timeout: float | None,  # noqa: ASYNC109
        session: TurnHandle | None = None,
    ) -> TurnOutput:
        from airlock.runner import RemoteTurn

        remote = self.remote
        assert isinstance(remote, RemoteTurn)

        async def kill() -> None:
            self._kill_group()

        async def failed(e: TurnError) -> EnvError:
            return EnvError.from_turn_error(e)

        async def finished() -> None:
            pass  # a runner process has no memory events to report after the turn

        return await run_in_sandbox(
            f"runner process {self.proc.pid if self.proc else '?'}",
            remote,
            input,
            events,
            timeout,
            stop=kill,
            failed=failed,
            finished=finished,
            session=session,
        )

    def _kill_group(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    async def stop(self) -> None:
        from airlock.runner import RemoteTurn

        if isinstance(self.remote, RemoteTurn):
            await self.remote.close()
        if self.proc is not None:
            self._kill_group()
            await self.proc.wait()
        if self.base is not None:
            await asyncio.to_thread(shutil.rmtree, self.base, True)

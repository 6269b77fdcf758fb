"""One local runner process: :class:`ProcessInstance`, the running box of the process backend.

A :class:`~airlock.sandbox._instance.SandboxInstance`: ``provision`` (a private 0700 base
directory with the control directory, the one-time token and the workspace; the runner
spawned in its own session, given the job's agent at once: this backend keeps no pool),
``wait_ready`` (health SERVING over the turn's own channel); the turn runs through
:mod:`airlock.sandbox._lifecycle`, then ``teardown`` (the process group killed, the base
directory removed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import airlock
from airlock.sandbox._lifecycle import shielded
from layer0 import EnvError, Scope, TurnError

from ._leftovers import JOB_MARKER, SESSION_MARKER

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.spec import AgentSpec

__all__ = ["ProcessInstance"]

_LOG_TAIL = 4000
#: So the child imports this very airlock (a checkout need not be installed).
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(airlock.__file__)))
#: Environment variables the runner process inherits (nothing else: no API keys, no tokens).
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")


class ProcessInstance:
    """One runner process of ``python`` (labelled with ``job`` for ``ensure_gone``, or with the
    long-lived sandbox ``session`` it serves), SERVING within ``start_timeout`` seconds of its
    spawn; torn down exactly once."""

    def __init__(
        self,
        python: str,
        job: str | None = None,
        *,
        start_timeout: float = 30.0,
        session: str | None = None,
    ) -> None:
        self.python = python
        self.job = job
        self.session = session
        self.start_timeout = start_timeout
        self.token = secrets.token_urlsafe(32)
        self.proc: asyncio.subprocess.Process | None = None
        self.base: Path | None = None
        self.remote: RemoteTurn | None = None
        self.address = ""
        self._torn_down = False

    @property
    def name(self) -> str:
        """How errors and outputs name it."""
        return f"runner process {self.proc.pid if self.proc else '?'}"

    async def provision(
        self, agent: AgentSpec, state: Iterable[tuple[Scope, str, Any]] | None = None
    ) -> None:
        """Spawn the runner in a fresh private directory, bound to ``agent`` and ``state``."""
        from airlock.runner import RemoteTurn

        control, workspace, log = await asyncio.to_thread(self._prepare_dirs)
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env["HOME"] = str(workspace)
        if self.job is not None:
            env[JOB_MARKER] = self.job  # what ensure_gone finds it by
        if self.session is not None:
            env[SESSION_MARKER] = self.session
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
        self.address = f"unix:{control / 'runner.sock'}"
        self.remote = RemoteTurn(self.address, self.token, agent, state=state)

    async def wait_ready(self) -> None:
        """Return once the runner answers SERVING over the turn's channel.

        Raises:
            EnvError: ``provision_failed`` with its output, when it exited or is not SERVING
                within ``start_timeout``.
        """
        from airlock.runner import RunnerCallError

        assert self.proc is not None and self.remote is not None, "provision() first"
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.returncode is not None:
                await self._fail(f"the runner exited with code {self.proc.returncode}")
            try:
                await self.remote.wait_until_serving(min(0.25, max(0.01, deadline - time.monotonic())))
                return
            except RunnerCallError as e:
                if time.monotonic() >= deadline:
                    await self._fail(f"not SERVING after {self.start_timeout:.0f}s ({e})")

    async def bound(self) -> None:
        """Nothing to bind: the runner got its agent when it was spawned."""

    def bind(self, agent: AgentSpec, state: Iterable[tuple[Scope, str, Any]] | None = None) -> None:
        """A fresh channel to the same runner for the next job of a long-lived sandbox, with
        its state snapshot."""
        from airlock.runner import RemoteTurn

        assert self.remote is not None, "provision() first"
        self.remote = RemoteTurn(self.address, self.token, agent, state=state)

    async def healthy(self) -> bool:
        """Whether the runner process still runs and answers SERVING (a quick check)."""
        from airlock.runner import RunnerCallError

        if self._torn_down or self.proc is None or self.proc.returncode is not None or self.remote is None:
            return False
        try:
            await self.remote.wait_until_serving(0.5)
        except RunnerCallError:
            return False
        return True

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

    async def stop(self) -> None:
        """Kill its process group (its turn ran past the deadline)."""
        self._kill_group()

    async def failure(self, error: TurnError) -> EnvError:
        """The turn's own failure: a runner process has no engine to ask how it ended."""
        return EnvError.from_turn_error(error)

    async def after_turn(self) -> None:
        """Nothing: a runner process has no memory events to report after the turn."""

    def _kill_group(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    async def teardown(self) -> None:
        """Close the channel, kill the process group, remove its directory; exactly once, even
        if we are cancelled (again) meanwhile."""
        await shielded(self._teardown)

    async def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        if self.remote is not None:
            await self.remote.close()
        if self.proc is not None:
            self._kill_group()
            await self.proc.wait()
        if self.base is not None:
            await asyncio.to_thread(shutil.rmtree, self.base, True)

"""One sandbox container: its control directory, token and container; torn down exactly once.

:class:`DockerInstance` is the running box of :class:`~._backend.DockerBackend` (see its
module for the control channel), a :class:`~airlock.sandbox._instance.SandboxInstance`:
``provision`` (control dir, token, hardened container, and the egress side when there is
one), ``wait_ready`` (socket, directory locked, health SERVING: no agent is needed yet, so a
warm pool member stops here), ``bind`` (the job's agent, state snapshot and late-bound
environment); the turn runs through :mod:`airlock.sandbox._lifecycle`, then ``teardown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from airlock.images import docker_errors
from airlock.sandbox._lifecycle import SETTLE_S, oom_exceeded, settle, shielded
from airlock.sandbox._limits import Limits
from layer0 import EnvError, Scope, TurnError

from ._config import GVISOR_KERNEL_DIED, SOCKET_NAME, TOKEN_NAME, Boundary, container_config, process_limits
from ._egress import EgressWiring
from ._labels import LABEL_SANDBOX, owner_labels
from ._reaper import owner_file, write_owner_file
from ._remove import force_remove

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.spec import AgentSpec

__all__ = ["DockerInstance", "call_engine"]

_log = logging.getLogger("airlock.sandbox.docker")
_T = TypeVar("_T")
_POLL_S = 0.01
_LOG_TAIL = 30


class DockerInstance:
    """One sandbox: its control dir, token and container; torn down exactly once.

    ``labels`` are added to the owner labels of every object it creates; ``extra`` adds
    container settings (env, mounts) as :func:`~._config.container_config` takes them;
    ``dirs`` are host directories of its own, removed at teardown; ``start_timeout`` is how
    long :meth:`wait_ready` waits for the runner by default.
    """

    def __init__(
        self,
        client: Any,
        state_dir: Path,
        *,
        labels: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
        dirs: Iterable[Path] = (),
        start_timeout: float = 30.0,
    ) -> None:
        self.client = client
        self.state_dir = state_dir
        self.id = f"sb-{secrets.token_hex(8)}"
        self.dir = state_dir / self.id
        self.socket = self.dir / SOCKET_NAME
        self.token = secrets.token_urlsafe(32)
        self.container: Any = None
        self.start_timeout = start_timeout
        #: Its resource limits (set by ``provision``): what an OOM kill is reported against.
        self.limits: Limits | None = None
        self.started_at = 0.0
        self.locked = False
        root = os.geteuid() == 0
        # Root hands the directory to uid 65534; otherwise the sandbox runs as our own uid.
        self.user = (65534, 65534) if root else (os.getuid(), os.getgid())
        self.root = root
        #: The isolation it was provisioned with (set by ``provision``).
        self.boundary: Boundary | None = None
        #: The network side (internal network, proxy, credentials); set by the environment.
        self.wiring: EgressWiring | None = None
        self._inflight: asyncio.Future[Any] | None = None
        self.remote: RemoteTurn | None = None
        self.labels = {**owner_labels(self.id), **(labels or {})}
        self.extra = dict(extra or {})
        self.dirs = tuple(dirs)
        #: The runner imports the turn's machinery once SERVING (a warm member: idle until its job).
        self.preload = False
        self._torn_down = False

    # -- provisioning -------------------------------------------------------------------

    async def provision(
        self, *, image: str, limits: Limits, runtimes: frozenset[str], boundary: Boundary
    ) -> None:
        self.started_at = time.time()
        self.boundary = boundary
        self.limits = limits
        # Shielded: if we are cancelled mid-create, teardown waits for it and removes it.
        self._inflight = asyncio.ensure_future(
            self._provision(image, limits, runtimes, boundary, self.labels)
        )
        await asyncio.shield(self._inflight)

    async def _provision(
        self, image: str, limits: Limits, runtimes: frozenset[str], boundary: Boundary, labels: dict[str, str]
    ) -> None:
        wiring = self.wiring
        await asyncio.to_thread(write_owner_file, self.state_dir, self.id, labels)
        if wiring is not None:
            await call_engine(wiring.write_files)
            if wiring.needs_network:
                await call_engine(wiring.create_network)
                await wiring.serve_events()
        config = container_config(
            image=image,
            sandbox_id=self.id,
            control_dir=str(self.dir),
            labels=labels,
            limits=limits,
            runtimes=runtimes,
            user=self.user,
            boundary=boundary,
            extra=_merged(wiring.sandbox_settings() if wiring is not None else {}, self.extra),
            preload=self.preload,
        )
        steps = [asyncio.to_thread(self._create_and_start, config)]
        if wiring is not None and wiring.needs_network:
            steps.append(asyncio.to_thread(wiring.create_proxy))
        results = await asyncio.gather(*steps, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    def _create_and_start(self, config: dict[str, Any]) -> None:
        errors = docker_errors()
        self.dir.mkdir(mode=0o700)
        token_path = self.dir / TOKEN_NAME
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
        with os.fdopen(fd, "w") as f:
            f.write(self.token)
        if self.root:
            os.chown(token_path, *self.user)
            os.chown(self.dir, *self.user)
        try:
            self.container = self.client.containers.create(**config)
            self.container.start()
        except errors.ImageNotFound as e:
            raise EnvError.provision_failed(
                f"sandbox image {config['image']} is missing; build it with: airlock images build"
            ) from e
        except errors.APIError as e:
            raise EnvError.provision_failed(
                f"cannot start the sandbox container: {e.explanation or e}"
            ) from e
        except errors.DockerException as e:
            raise EnvError.provision_failed(f"cannot start the sandbox container: {e}") from e

    @property
    def name(self) -> str:
        """How errors and outputs name it."""
        return f"sandbox {self.id}"

    async def wait_ready(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait for the socket, lock the directory, then wait for health SERVING (and for the
        egress proxy, when there is one), within ``timeout`` (None: ``start_timeout``). No
        agent is needed yet."""
        from airlock.runner import RunnerCallError, wait_until_serving

        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        checked = time.monotonic()
        while not await asyncio.to_thread(self._socket_ready, False):
            if time.monotonic() > deadline:
                await asyncio.to_thread(self._socket_ready)  # a wrong entry: isolation_violation
                await self._fail_start(f"no runner socket after {timeout:.0f}s")
            if time.monotonic() - checked > 0.25:
                checked = time.monotonic()
                await self._fail_if_exited()
            await asyncio.sleep(_POLL_S)
        await asyncio.to_thread(self._lock)
        try:
            await wait_until_serving(self.address, max(0.1, deadline - time.monotonic()))
        except RunnerCallError as e:
            await self._fail_start(f"runner not SERVING ({e})")
        if self.wiring is not None and self.wiring.needs_network:
            await self.wiring.wait_ready(max(0.1, deadline - time.monotonic()))

    @property
    def address(self) -> str:
        """The runner's gRPC address on this host."""
        return f"unix:{self.socket}"

    def bind(
        self,
        agent: AgentSpec,
        state: Iterable[tuple[Scope, str, Any]] | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        """The job's agent, state snapshot and late-bound environment, for :meth:`execute`."""
        from airlock.runner import RemoteTurn

        self.remote = RemoteTurn(self.address, self.token, agent, state=state, environment=environment)

    async def healthy(self) -> bool:
        """Whether the runner still answers SERVING (a quick check over its socket)."""
        from airlock.runner import RunnerCallError, wait_until_serving

        try:
            await wait_until_serving(self.address, 0.5)
        except RunnerCallError:
            return False
        return True

    def _socket_ready(self, strict: bool = True) -> bool:
        """Whether the runner's socket is there, a socket owned by the sandbox user. Anything
        else in its place raises ``isolation_violation`` (``strict=False``: is not ready yet;
        gVisor may show the entry before it is the bound socket)."""
        try:
            st = os.lstat(self.socket)
        except FileNotFoundError:
            return False
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != self.user[0]:
            if not strict:
                return False
            raise EnvError.isolation_violation(
                f"sandbox {self.id}: {SOCKET_NAME} is not a socket owned by the sandbox user; refusing it"
            )
        return True

    def _lock(self) -> None:
        """Take the control directory back: the sandbox can no longer change its entries."""
        with contextlib.suppress(FileNotFoundError):
            (self.dir / TOKEN_NAME).unlink()  # normally the runner already deleted it
        if self.root:
            os.chown(self.dir, 0, 0)
        os.chmod(self.dir, 0o700)
        self.locked = True
        self._socket_ready()  # re-check now that nothing can swap it

    async def _fail_if_exited(self) -> None:
        state = await self._state()
        if state.get("Status") in ("exited", "dead"):
            await self._fail_start(f"the runner exited with code {state.get('ExitCode')}")

    async def _fail_start(self, why: str) -> None:
        logs = await self.logs()
        raise EnvError.provision_failed(
            f"sandbox {self.id} did not become ready: {why}; last log lines:\n{logs or '(no output)'}"
        )

    async def _state(self) -> dict[str, Any]:
        errors = docker_errors()
        try:
            info = await asyncio.to_thread(self.client.api.inspect_container, self.container.id)
        except errors.DockerException:
            return {}
        return dict(info.get("State") or {})

    async def logs(self) -> str:
        """The container's last log lines (empty when unavailable)."""
        errors = docker_errors()
        if self.container is None:
            return ""
        try:
            raw = await asyncio.to_thread(self.container.logs, tail=_LOG_TAIL)
        except errors.DockerException:
            return ""
        return bytes(raw).decode(errors="replace").strip()

    # -- the turn -----------------------------------------------------------------------

    async def failure(self, error: TurnError) -> EnvError:
        """An OOM kill, a gVisor kernel that died, a container that died, else the turn's
        own failure (a broken channel: judged once the container settled)."""
        from airlock.runner import channel_lost

        state = await (self._settled_state() if channel_lost(error) else self._state())
        await self._raise_if_oom(self.limits, error, state)
        if state.get("Status") in ("exited", "dead"):
            if (died := self._kernel_died(state, self.limits)) is not None:
                return died
            logs = await self.logs()
            return EnvError.other(
                f"sandbox {self.id} died during the turn (exit code {state.get('ExitCode')}): "
                f"{error}; last log lines:\n{logs}"
            )
        return EnvError.from_turn_error(error)

    async def after_turn(self) -> None:
        """Raise ``resource_exceeded`` if a process inside was OOM-killed during the turn."""
        await self._raise_if_oom(self.limits, None)

    async def _settled_state(self) -> dict[str, Any]:
        """The container's state once it stopped running, or as it is after ``SETTLE_S``: its
        runner's channel broke, and the sandbox may be dying (its state and OOM flag are set
        only once it has gone)."""
        import requests

        errors = docker_errors()
        with contextlib.suppress(errors.DockerException, requests.RequestException):
            await asyncio.to_thread(self.client.api.wait, self.container.id, timeout=SETTLE_S)
        return await self._state()

    def _kernel_died(self, state: Mapping[str, Any], limits: Limits | None) -> EnvError | None:
        """``resource_exceeded`` for a gVisor sandbox whose kernel died (see
        :data:`~._config.GVISOR_KERNEL_DIED`); None for any other death."""
        boundary = self.boundary
        if boundary is None or limits is None or boundary.kind != "gvisor":
            return None
        if state.get("ExitCode") != GVISOR_KERNEL_DIED:
            return None
        cap = process_limits(boundary, limits.pids)["pids_limit"]
        return EnvError.resource_exceeded(
            f"processes: sandbox {self.id}'s gVisor kernel died (exit code {GVISOR_KERNEL_DIED}): it "
            f"could not start a host thread within its cap of {cap} host tasks, which many processes "
            f"at once reach (the sandbox may run {limits.pids})"
        )

    async def _raise_if_oom(
        self, limits: Limits | None, cause: BaseException | None, state: Mapping[str, Any] | None = None
    ) -> None:
        """Raise ``resource_exceeded`` if the sandbox was OOM-killed (``state``: the container's
        state as just read, else read now)."""
        state = state if state is not None else await self._state()
        oom = bool(state.get("OOMKilled")) or await self._oom_events() > 0
        if oom:
            raise oom_exceeded(self.id, limits) from cause

    async def _oom_events(self) -> int:
        errors = docker_errors()

        def count() -> int:
            stream = self.client.events(
                since=int(self.started_at) - 1,
                until=f"{time.time():.3f}",
                filters={"container": self.container.id, "event": "oom"},
                decode=True,
            )
            try:
                return sum(1 for _ in stream)
            finally:
                stream.close()

        try:
            return await asyncio.to_thread(count)
        except errors.DockerException:
            return 0

    async def stop(self) -> None:
        """Kill the container (its turn ran past the deadline)."""
        errors = docker_errors()
        with contextlib.suppress(errors.DockerException):
            await asyncio.to_thread(self.container.kill)

    # -- teardown -----------------------------------------------------------------------

    async def teardown(self) -> None:
        """Remove the container(s), the egress wiring and the control directory, exactly once,
        even if we are cancelled (again) meanwhile."""
        await shielded(self._teardown)

    async def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        await settle(self._inflight)
        if self.remote is not None:
            await self.remote.close()
        problems = await asyncio.to_thread(self._remove_all)
        # The engine restarting, or one that has not finished killing the sandbox (a gVisor
        # sandbox reaping hundreds of processes on a busy host): wait for it, then finish.
        for delay in _ENGINE_RETRY_DELAYS:
            if not problems:
                break
            answers = await asyncio.to_thread(_engine_answers, self.client)
            why = "incomplete" if answers else "engine unreachable"
            _log.info("teardown of sandbox %s %s; retrying in %.1fs", self.id, why, delay)
            await asyncio.sleep(delay)
            problems = await asyncio.to_thread(self._remove_all)
        if problems:
            # Kept for the reaper (``airlock gc``): the owner file says whose it was.
            _log.warning("teardown of sandbox %s incomplete: %s", self.id, "; ".join(problems))
        else:
            owner_file(self.state_dir, self.id).unlink(missing_ok=True)
        if self.wiring is not None:
            await self.wiring.close_events()

    def _remove_all(self) -> list[str]:
        """Remove the container(s), the egress wiring and the control directory (idempotent);
        return what could not be removed."""
        errors = docker_errors()
        problems: list[str] = []
        targets = [self.container] if self.container is not None else []
        if not targets:  # create may have succeeded without us learning the id
            try:
                targets = self.client.containers.list(
                    all=True, filters={"label": f"{LABEL_SANDBOX}={self.id}"}
                )
            except errors.DockerException as e:
                problems.append(f"listing: {e}")
        for c in targets:
            try:
                force_remove(self.client, c.id)
            except errors.DockerException as e:
                problems.append(f"container {c.id[:12]}: {e}")
        if self.wiring is not None:
            problems += self.wiring.remove()
        for d in (self.dir, *self.dirs):
            try:
                if d.is_dir() and not d.is_symlink():
                    shutil.rmtree(d)
            except OSError as e:
                problems.append(f"{d}: {e}")
        return problems


#: Pauses between teardown attempts while something remains (about 30 s in all:
#: long enough for a daemon restart, short enough not to hold a job's end for long).
_ENGINE_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0)


def _engine_answers(client: Any) -> bool:
    """Whether the engine answers a ping (blocking)."""
    try:
        return bool(client.ping())
    except (docker_errors().DockerException, OSError):
        return False


async def call_engine(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """A blocking docker-py call in a thread, its errors mapped to EnvError.provision_failed."""
    errors = docker_errors()
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except errors.DockerException as e:
        raise EnvError.provision_failed(f"Docker engine error: {e}") from e


def _merged(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two sets of extra container settings as one (environments and mounts joined)."""
    out = {**first, **second}
    for key in ("environment", "volumes"):
        out[key] = {**(first.get(key) or {}), **(second.get(key) or {})}
    return out

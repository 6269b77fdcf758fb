"""DockerEnvironment: each turn in its own hardened container on a real Docker engine.

Control channel (how the controller reaches a runner that has no network at all):

* The sandbox runs with ``network_mode="none"``: no interface but loopback, so nothing
  inside can reach the host, the LAN or the internet, and nothing outside can reach it.
* Per sandbox the controller creates a host directory ``<state_dir>/<sandbox-id>/``
  (``/run/airlock`` for root), mode 0700 and owned by the sandbox uid (65534), and
  bind-mounts it at ``/run/airlock``. It is the **only** host path the sandbox sees.
* The controller writes a fresh 256-bit token to ``token`` there (0400); the runner reads
  it and deletes it (``--token-file-delete``), then serves gRPC on the Unix socket
  ``/run/airlock/runner.sock``. Every Runner RPC needs the token; health does not.
* As soon as the socket appears, the controller verifies it (a real socket, not a symlink,
  owned by the sandbox uid) and **locks the directory**: ownership goes back to root, mode
  0700. The runner keeps its listening socket, but nothing in the sandbox can list,
  replace or add entries any more — so the sandbox cannot swap ``runner.sock`` for a
  symlink to some other host socket (e.g. Docker's) that the controller would then dial.
  The controller connects with :class:`~airlock.runner.RemoteTurn` to
  ``unix:<host dir>/runner.sock``.
* Why not TCP on an internal network: a network namespace with a route is more attack
  surface (the runner's port reachable from other containers on it, DNS, ARP), costs a
  network create/remove per sandbox (~100 ms) and still needs host-side access. A Unix
  socket gives the controller a channel with filesystem permissions and no routing at all.

Lifecycle of ``run``: check the spec (refuse what cannot be enforced), require the image
(naming ``airlock images build``), create the control dir + token, create and start the
container, wait for health SERVING (start timeout; on failure ``provision_failed`` with the
container's last log lines), run the turn streaming its events to the optional sink, and
**always** tear down in ``finally`` — container force-removed, control dir removed — also on
cancellation and timeout. Teardown is shielded from a second cancellation and waits for a
create still in flight, so a cancel during provisioning leaves nothing behind. Every object
carries the labels of :mod:`._labels`; a startup sweep (and ``airlock gc``) removes objects
whose owner process is gone.

Timeouts: a turn gets its ``max_duration`` (TurnConfig, else the AgentSpec defaults) plus
``timeout_grace`` for the runner to report its own ``timeout`` exit; the environment-level
``turn_timeout`` is a hard cap. Past the deadline the container is killed and ``run``
returns a TurnOutput with ``ExitReason.timeout()`` (not an error: the caller decides what a
timed-out turn means, as for the runner's own timeout) whose message says it was killed.
Out of memory: any OOM kill inside the sandbox during the turn (the engine's ``oom`` event,
or the container's ``OOMKilled`` state) → ``EnvError.resource_exceeded("memory …")``.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from airlock.images import docker_client, docker_errors, require_image, runner_image_tag
from airlock.policy import SecretResolver, SidecarRoute, resolve_credentials, sidecar_agent
from airlock.sandbox._environment import SandboxEnvironment
from airlock.sandbox._events import EventSink
from airlock.sandbox._lifecycle import oom_exceeded, settle, shielded
from airlock.sandbox._limits import Limits, SandboxDefaults, resolve_limits
from airlock.sandbox._port import SandboxRequest
from airlock.sandbox._redact import redacted_output, redacting_sink
from airlock.sandbox._turn import hard_timeout_s, timeout_output
from layer0 import (
    EnvError,
    Scope,
    TurnError,
    TurnInput,
    TurnOutput,
)

from ._config import (
    SOCKET_NAME,
    TOKEN_NAME,
    Boundary,
    container_config,
    resolve_boundary,
)
from ._egress import (
    EGRESS_NETWORK,
    EgressWiring,
    ensure_egress_network,
    network_gateway,
    proxy_urls,
)
from ._labels import LABEL_SANDBOX, owner_labels
from ._reaper import ReapReport, default_state_dir, owner_file, reap_orphans, write_owner_file
from ._settings import DockerSettings

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.spec import AgentSpec

__all__ = ["DockerEnvironment", "DockerSandbox"]

_log = logging.getLogger("airlock.sandbox.docker")
_T = TypeVar("_T")
_POLL_S = 0.01
_LOG_TAIL = 30


class DockerSandbox:
    """The Docker backend: each turn in a fresh hardened container (a :class:`~airlock.sandbox.Sandbox`).

    Args:
        image: the runner image (default ``airlock-runner:<version>``, built by
            ``airlock images build``); a ``container`` isolation boundary may name another.
        state_dir: parent of the per-sandbox control directories (default
            :func:`~._reaper.default_state_dir`); must be visible to dockerd at the same path.
        start_timeout: seconds from container start to health SERVING.
        turn_timeout: hard cap on a turn's wall-clock seconds (None: only max_duration).
        timeout_grace: extra seconds past ``max_duration`` before the container is killed.
        defaults: limits for what ``spec.resources`` leaves unset.
        sweep: remove orphaned sandboxes (owner process gone) before the first run.
        client: a ``docker.DockerClient`` (default: from the environment).
        secrets: resolves credential names to values (env_var, file and sidecar
            credentials); without one, a spec with credentials is refused.
        egress_networks: Docker networks the egress proxy uses to reach allowed destinations
            (default: the shared ``airlock-egress`` bridge, created on first use).
        settings: the ``backends.docker`` section (which engine runtime provides which
            isolation kind, and the weakest boundary any sandbox gets).
    """

    def __init__(
        self,
        *,
        image: str | None = None,
        state_dir: Path | None = None,
        start_timeout: float = 30.0,
        turn_timeout: float | None = None,
        timeout_grace: float = 5.0,
        defaults: SandboxDefaults | None = None,
        sweep: bool = True,
        client: Any = None,
        secrets: SecretResolver | None = None,
        egress_networks: Sequence[str] | None = None,
        settings: DockerSettings | None = None,
    ) -> None:
        self.settings = settings or DockerSettings()
        self.image = image or runner_image_tag()
        self.state_dir = (state_dir or default_state_dir()).absolute()
        self.start_timeout = start_timeout
        self.turn_timeout = turn_timeout
        self.timeout_grace = timeout_grace
        self.defaults = defaults or SandboxDefaults()
        self._sweep = sweep
        self._client = client
        self._runtimes: frozenset[str] | None = None
        self.secrets = secrets
        self.egress_networks = tuple(egress_networks) if egress_networks is not None else None
        self._egress_ready = False
        self._ready = asyncio.Lock()
        #: What the startup sweep removed (None until it ran).
        self.swept: ReapReport | None = None

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a fresh container, removed before this returns.

        The state snapshot travels with the turn's request, so the sandbox needs no path
        back to any store. ``request.events`` receives the turn's events and, when the
        sandbox has egress, every egress-proxy decision (:class:`~airlock.proxy.EgressEvent`)
        and credential-proxy request (:class:`~airlock.proxy.CredentialProxyEvent`).

        Raises:
            EnvError: ``isolation_violation`` for isolation the engine cannot provide;
                ``credential_failed`` for a secret that cannot be resolved;
                ``resource_exceeded`` for bad limits, missing GPU runtime, or an OOM kill;
                ``provision_failed`` for a missing image, an unreachable engine, or a runner
                or proxy that never became ready; ``turn_error`` for the turn's own failure.
        """
        agent, spec, plan = request.agent, request.environment, request.plan
        client, runtimes = await self._prepare()
        networked = plan.needs_egress_proxy or bool(plan.sidecars)
        boundary = resolve_boundary(
            spec, runtimes, self.settings.runtimes, networked=networked, floor=self.settings.isolation_floor
        )
        limits = resolve_limits(spec, self.defaults)
        image = boundary.image or self.image
        await asyncio.to_thread(require_image, client, image)
        credentials = await resolve_credentials(plan, self.secrets)
        sink = request.events
        if sink is not None and credentials.values:
            sink = redacting_sink(sink, credentials.secrets)
        sandbox = _Sandbox(client, self.state_dir)
        wiring = EgressWiring(
            client=client,
            sandbox_id=sandbox.id,
            state_dir=self.state_dir,
            labels=owner_labels(sandbox.id),
            user=sandbox.user,
            root=sandbox.root,
            image=self.image,
            plan=plan,
            credentials=credentials,
            egress_networks=await self._egress_networks(client) if plan.needs_egress_proxy else (),
            events=sink,
        )
        sandbox.wiring = wiring
        try:
            await sandbox.provision(image=image, limits=limits, runtimes=runtimes, boundary=boundary)
            agent = sidecar_agent(agent, plan, proxy_urls(wiring.ports))
            await sandbox.wait_serving(self.start_timeout, agent, request.state)
            deadline = hard_timeout_s(agent, request.input, self.turn_timeout, self.timeout_grace)
            output = await sandbox.execute(request.input, sink, deadline, limits)
        finally:
            await sandbox.teardown_shielded()
        if credentials.values:
            output = redacted_output(output, credentials.secrets)
        return output

    async def host_address(self) -> str:
        """The host's address on the (first) egress network: where a service on this host
        (e.g. the local model server) is reachable from the egress proxy.

        Raises:
            EnvError: ``provision_failed`` when the egress network has no gateway address.
        """
        client, _ = await self._prepare()
        names = await self._egress_networks(client)

        def gateway() -> str | None:
            return network_gateway(client.networks.get(names[0]))

        address = await _call(gateway)
        if not address:
            raise EnvError.provision_failed(
                f"the egress network {names[0]} has no gateway address; a service on this host "
                "cannot be reached from the sandbox"
            )
        return address

    async def _egress_networks(self, client: Any) -> tuple[str, ...]:
        if self.egress_networks is not None:
            return self.egress_networks
        async with self._ready:
            if not self._egress_ready:
                await _call(ensure_egress_network, client, EGRESS_NETWORK)
                self._egress_ready = True
        return (EGRESS_NETWORK,)

    async def _prepare(self) -> tuple[Any, frozenset[str]]:
        async with self._ready:
            if self._client is None:
                self._client = await asyncio.to_thread(docker_client)
            if self._runtimes is None:
                info = await _call(self._client.info)
                self._runtimes = frozenset((info.get("Runtimes") or {}).keys())
            if self._sweep and self.swept is None:
                self.swept = await asyncio.to_thread(reap_orphans, self._client, self.state_dir)
                if self.swept.removed:
                    _log.info("removed orphaned sandboxes: %s", self.swept)
            return self._client, self._runtimes


async def _call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """A blocking docker-py call in a thread, its errors mapped to EnvError.provision_failed."""
    errors = docker_errors()
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except errors.DockerException as e:
        raise EnvError.provision_failed(f"Docker engine error: {e}") from e


class _Sandbox:
    """One sandbox: its control dir, token and container; torn down exactly once."""

    def __init__(self, client: Any, state_dir: Path) -> None:
        self.client = client
        self.state_dir = state_dir
        self.id = f"sb-{secrets.token_hex(8)}"
        self.dir = state_dir / self.id
        self.socket = self.dir / SOCKET_NAME
        self.token = secrets.token_urlsafe(32)
        self.container: Any = None
        self.started_at = 0.0
        self.locked = False
        root = os.geteuid() == 0
        # Root hands the directory to uid 65534; otherwise the sandbox runs as our own uid.
        self.user = (65534, 65534) if root else (os.getuid(), os.getgid())
        self.root = root
        #: The network side (internal network, proxy, credentials); set by the environment.
        self.wiring: EgressWiring | None = None
        self._inflight: asyncio.Future[Any] | None = None
        self.remote: RemoteTurn | None = None
        self._torn_down = False

    # -- provisioning -------------------------------------------------------------------

    async def provision(
        self, *, image: str, limits: Limits, runtimes: frozenset[str], boundary: Boundary
    ) -> None:
        labels = owner_labels(self.id)
        self.started_at = time.time()
        # Shielded: if we are cancelled mid-create, teardown waits for it and removes it.
        self._inflight = asyncio.ensure_future(self._provision(image, limits, runtimes, boundary, labels))
        await asyncio.shield(self._inflight)

    async def _provision(
        self, image: str, limits: Limits, runtimes: frozenset[str], boundary: Boundary, labels: dict[str, str]
    ) -> None:
        wiring = self.wiring
        await asyncio.to_thread(write_owner_file, self.state_dir, self.id, labels)
        if wiring is not None:
            await _call(wiring.write_files)
            if wiring.needs_network:
                await _call(wiring.create_network)
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
            extra=wiring.sandbox_settings() if wiring is not None else None,
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

    async def wait_serving(
        self,
        timeout: float,  # noqa: ASYNC109
        agent: AgentSpec,
        state: Iterable[tuple[Scope, str, Any]] | None = None,
    ) -> None:
        """Wait for the socket, lock the directory, then wait for health SERVING."""
        from airlock.runner import RemoteTurn, RunnerCallError

        deadline = time.monotonic() + timeout
        checked = time.monotonic()
        while not await asyncio.to_thread(self._socket_ready):
            if time.monotonic() > deadline:
                await self._fail_start(f"no runner socket after {timeout:.0f}s")
            if time.monotonic() - checked > 0.25:
                checked = time.monotonic()
                await self._fail_if_exited()
            await asyncio.sleep(_POLL_S)
        await asyncio.to_thread(self._lock)
        self.remote = RemoteTurn(f"unix:{self.socket}", self.token, agent, state=state)
        try:
            await self.remote.wait_until_serving(max(0.1, deadline - time.monotonic()))
        except RunnerCallError as e:
            await self._fail_start(f"runner not SERVING ({e})")
        if self.wiring is not None and self.wiring.needs_network:
            await self.wiring.wait_ready(max(0.1, deadline - time.monotonic()))

    def _socket_ready(self) -> bool:
        try:
            st = os.lstat(self.socket)
        except FileNotFoundError:
            return False
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != self.user[0]:
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

    async def execute(
        self,
        input: TurnInput,
        events: EventSink | None,
        timeout: float | None,  # noqa: ASYNC109
        limits: Limits,
    ) -> TurnOutput:
        remote = self.remote
        assert remote is not None, "wait_serving() first"
        began = time.monotonic()
        try:
            try:
                output = await asyncio.wait_for(remote.execute(input, events=events), timeout)
            except TimeoutError:
                await self._kill()
                elapsed = time.monotonic() - began
                return timeout_output(f"sandbox {self.id}", timeout or elapsed, elapsed)
            except TurnError as e:
                await self._raise_if_oom(limits, e)
                state = await self._state()
                if state.get("Status") in ("exited", "dead"):
                    logs = await self.logs()
                    raise EnvError.other(
                        f"sandbox {self.id} died during the turn (exit code {state.get('ExitCode')}): "
                        f"{e}; last log lines:\n{logs}"
                    ) from e
                raise EnvError.from_turn_error(e) from e
        finally:
            await remote.close()
        await self._raise_if_oom(limits, None)
        return output

    async def _raise_if_oom(self, limits: Limits, cause: BaseException | None) -> None:
        state = await self._state()
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

    async def _kill(self) -> None:
        errors = docker_errors()
        with contextlib.suppress(errors.DockerException):
            await asyncio.to_thread(self.container.kill)

    # -- teardown -----------------------------------------------------------------------

    async def teardown_shielded(self) -> None:
        """Tear down even if we are cancelled (again) meanwhile."""
        await shielded(self._teardown)

    async def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        await settle(self._inflight)
        if self.remote is not None:
            await self.remote.close()
        problems = await asyncio.to_thread(self._remove_all)
        for delay in _ENGINE_RETRY_DELAYS:  # the engine restarting: wait for it, then finish
            if not problems or await asyncio.to_thread(_engine_answers, self.client):
                break
            _log.info("engine unreachable during teardown of sandbox %s; retrying in %.1fs", self.id, delay)
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
                self.client.api.remove_container(c.id, force=True)
            except errors.NotFound:
                pass
            except errors.DockerException as e:
                problems.append(f"container {c.id[:12]}: {e}")
        if self.wiring is not None:
            problems += self.wiring.remove()
        try:
            if self.dir.is_dir() and not self.dir.is_symlink():
                shutil.rmtree(self.dir)
        except OSError as e:
            problems.append(f"{self.dir}: {e}")
        return problems


#: Pauses between teardown attempts while the engine does not answer (about 30 s in all:
#: long enough for a daemon restart, short enough not to hold a job's end for long).
_ENGINE_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0)


def _engine_answers(client: Any) -> bool:
    """Whether the engine answers a ping (blocking)."""
    try:
        return bool(client.ping())
    except (docker_errors().DockerException, OSError):
        return False


class DockerEnvironment(SandboxEnvironment):
    """:class:`DockerSandbox` as a ``layer0.Environment`` (``run(turn, input, spec)``).

    Args:
        sidecar_routes: upstream + header per sidecar credential name, over the built-in
            conventions (``anthropic-api-key``, ``openai-api-key``); ``run`` may add more.
        events: default sink for the turn's events (``run(..., events=)`` overrides).
        options: :class:`DockerSandbox`'s arguments.
    """

    sandbox: DockerSandbox

    def __init__(
        self,
        *,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
        events: EventSink | None = None,
        **options: Any,
    ) -> None:
        super().__init__(DockerSandbox(**options), sidecar_routes=sidecar_routes, events=events)

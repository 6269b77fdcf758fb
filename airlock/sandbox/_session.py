"""LongLivedBox: one box kept for several jobs, run one after another (a long-lived sandbox).

A backend's ``open`` provisions and binds a box once (its cold start, never a warm pool
member), labelled with the session's id; :meth:`LongLivedBox.run` then runs each job's turn
in that same box through :func:`~._lifecycle.execute`, with the job's own state snapshot,
events and handle. The workspace is shared: what one job's tools wrote, the next job reads.
"Same processes" means the same runner process and box only: every tool process is killed at
the end of its call (``tools/_supervisor.py``), so no background process outlives a call, let
alone a job.

Jobs never overlap: a second :meth:`~LongLivedBox.run` (or a :meth:`~LongLivedBox.snapshot`)
while one runs is refused with :class:`SandboxBusy` (the caller serialises its jobs). A box
that is lost (it died, was removed, its runner stopped answering) is torn down and reported
as an ``EnvError`` (kind ``other``), so the caller can open a fresh one from its last snapshot.
:meth:`~LongLivedBox.close` removes everything, exactly once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from airlock.errors import AirlockError
from layer0 import EnvError, ExitReason, Scope, TurnInput, TurnOutput

from ._events import SandboxEvent, SandboxEventSink
from ._instance import SandboxInstance
from ._lifecycle import execute
from ._redact import redacted_output, redacting_sink
from ._turn import hard_timeout_s

if TYPE_CHECKING:
    from airlock.policy import ResolvedCredentials
    from airlock.spec import AgentSpec

    from ._handle import TurnHandle

__all__ = ["EventRelay", "KeepableInstance", "LongLivedBox", "SandboxBusy", "proxied_box"]


class SandboxBusy(AirlockError):
    """A session's box already runs a job (or takes a snapshot): jobs run one after another."""


class KeepableInstance(SandboxInstance, Protocol):
    """A box a session can keep: it also says whether its runner still answers."""

    async def healthy(self) -> bool:
        """Whether the runner still answers SERVING (a quick check)."""
        ...


_I = TypeVar("_I", bound=KeepableInstance)

#: Binds the box to the next job: a fresh channel to its runner carrying the job's state.
Bind = Callable[[tuple[tuple[Scope, str, Any], ...]], Awaitable[None]]


class EventRelay:
    """The sink a box is given once at its start (its proxies report to it for its whole life),
    passing each event to the job that runs now (dropped while none does)."""

    def __init__(self) -> None:
        self.target: SandboxEventSink | None = None

    async def __call__(self, event: SandboxEvent) -> None:
        target = self.target
        if target is not None:
            await target(event)


class LongLivedBox(Generic[_I]):
    """One provisioned, ready box of a backend, kept for jobs run one after another.

    Args:
        instance: the box (already started and ready).
        label: the session's id, which the box is labelled with.
        bind: gives the box the next job's state snapshot (the backend's step).
        relay: the sink the box's proxies were given at its start.
        secrets: credential values kept out of every output and event.
        timeout_of: a turn's deadline in seconds when :meth:`run` is given none.
    """

    def __init__(
        self,
        instance: _I,
        *,
        label: str,
        bind: Bind,
        relay: EventRelay | None = None,
        secrets: Iterable[str] = (),
        timeout_of: Callable[[TurnInput], float | None] = lambda _: None,
    ) -> None:
        self.instance = instance
        self.label = label
        self._bind = bind
        self._relay = relay or EventRelay()
        self._secrets = tuple(secrets)
        self._timeout_of = timeout_of
        self._busy = False
        self._closed = False
        #: Why the box is gone (None: it is not known to be).
        self.lost: str | None = None

    @property
    def name(self) -> str:
        """How errors name it."""
        return f"sandbox session {self.label} ({self.instance.name})"

    async def run(
        self,
        input: TurnInput,
        events: SandboxEventSink | None = None,
        state: Iterable[tuple[Scope, str, Any]] = (),
        handle: TurnHandle | None = None,
        deadline: float | None = None,
    ) -> TurnOutput:
        """Run one job's turn in the box (``deadline``: seconds, None: the agent's own), with
        ``state`` as its snapshot, ``events`` receiving its events and ``handle`` its controls.

        Raises:
            SandboxBusy: another job runs in the box now.
            EnvError: ``other`` when the box is closed or was lost (re-open it from a
                snapshot); else as :meth:`~airlock.sandbox.Sandbox.run`.
        """
        self._claim()
        try:
            return await self._run(input, events, tuple(state), handle, deadline)
        finally:
            self._relay.target = None
            self._busy = False

    async def _run(
        self,
        input: TurnInput,
        events: SandboxEventSink | None,
        state: tuple[tuple[Scope, str, Any], ...],
        handle: TurnHandle | None,
        deadline: float | None,
    ) -> TurnOutput:
        sink = events
        if sink is not None and self._secrets:
            sink = redacting_sink(sink, self._secrets)
        self._relay.target = sink
        timeout = deadline if deadline is not None else self._timeout_of(input)
        try:
            await self._bind(state)
            output = await execute(self.instance, input, sink, timeout, handle)
        except EnvError as e:
            lost = await self._if_lost(str(e))
            if lost is None:
                raise
            raise lost from e
        if output.exit_reason == ExitReason.timeout() and not await self.instance.healthy():
            await self._gone("it was stopped at the turn's deadline")  # not the runner's own timeout
        return redacted_output(output, self._secrets) if self._secrets else output

    async def snapshot(self, max_bytes: int) -> AsyncIterator[Any]:
        """The workspace's snapshot from the idle box (``WorkspaceBlob`` pieces, then the
        ``WorkspaceSnapshot``, or a ``WorkspaceStopped`` past ``max_bytes``), through the
        runner's ``SnapshotWorkspace`` call.

        Raises:
            SandboxBusy: a job runs in the box now.
            EnvError: ``other`` when the box is closed or lost, or its runner client cannot
                take snapshots.
        """
        self._claim()
        try:
            remote = self.instance.remote
            take = getattr(remote, "snapshot_workspace", None)
            if take is None:
                raise EnvError.other(f"{self.name}: its runner client cannot snapshot the workspace")
            try:
                async for event in take(max_bytes):
                    yield event
            except Exception as e:
                lost = await self._if_lost(str(e))
                if lost is None:
                    raise
                raise lost from e
            finally:
                if remote is not None:
                    await remote.close()
        finally:
            self._busy = False

    async def alive(self) -> bool:
        """Whether the box is open and its runner still answers."""
        if self._closed or self.lost is not None:
            return False
        return await self.instance.healthy()

    async def close(self) -> None:
        """Tear the box down and remove everything it created (exactly once; idempotent)."""
        self._closed = True
        await self.instance.teardown()

    def _claim(self) -> None:
        if self._busy:
            raise SandboxBusy(f"{self.name} runs a job now; jobs run in it one after another")
        if self._closed:
            raise EnvError.other(f"{self.name} is closed")
        if self.lost is not None:
            raise EnvError.other(f"{self.name} was lost ({self.lost}); re-open it from its last snapshot")
        self._busy = True

    async def _if_lost(self, why: str) -> EnvError | None:
        """The error of a box found gone after a failure (None: it still answers)."""
        if await self.instance.healthy():
            return None
        await self._gone(why)
        return EnvError.other(f"{self.name} was lost: {why}; re-open it from its last snapshot")

    async def _gone(self, why: str) -> None:
        self.lost = why
        await self.instance.teardown()


def proxied_box(
    instance: _I,
    *,
    label: str,
    bind: Bind,
    relay: EventRelay,
    credentials: ResolvedCredentials,
    agent: AgentSpec,
    turn_timeout: float | None,
    grace: float,
) -> LongLivedBox[_I]:
    """The kept box of a backend whose sandboxes have proxies (Docker, Kubernetes): their
    events relayed to the running job, the credentials' values kept out of what it reports,
    and each turn's deadline the agent's."""
    return LongLivedBox(
        instance,
        label=label,
        bind=bind,
        relay=relay,
        secrets=credentials.secrets if credentials.values else (),
        timeout_of=partial(hard_timeout_s, agent, env_timeout=turn_timeout, grace=grace),
    )

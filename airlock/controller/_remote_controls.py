"""RemoteControls: pause, resume, step, inspect and signals for a job another replica runs.

Only the replica running a job holds its turn's live sandbox. When the job is not running
here, the call goes to the replica that holds it (its claim), relayed through the store
(:class:`~._control_relay.ControlRelay`); that replica runs it on its own controls and answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import JsonValue, TypeAdapter

from airlock.jobs import Inspection, Job, JobEvent

from ._active import ActiveJobs
from ._control_relay import ControlRelay, Handler
from ._job_controls import Controls
from ._job_events import JobEvents
from ._store import JobStore

if TYPE_CHECKING:
    from airlock.runner import StepInfo

_INSPECTION = TypeAdapter(Inspection)


class RemoteControls:
    """The controls of jobs running in other replicas, and the answers to theirs.

    Args:
        store: the shared job store.
        events: reads jobs and their events.
        active: this replica's jobs (a job with a live turn here is not remote).
        local: this replica's own controls (resolved when a relayed call arrives).
    """

    def __init__(
        self, store: JobStore, events: JobEvents, active: ActiveJobs, local: Callable[[], Controls]
    ) -> None:
        self._events = events
        self._active = active
        self._local = local
        #: Carries the calls between replicas.
        self.relay = ControlRelay(store, self._handlers())

    async def _owner(self, job_id: str) -> str | None:
        """The replica running ``job_id``, when it is not this one (None: here, or nowhere)."""
        if self._active.handle(job_id) is not None:
            return None
        return await self.relay.owner(job_id)

    async def _ask(self, owner: str, job_id: str, call: str, **args: JsonValue) -> JsonValue:
        await self._events.get(job_id)  # JobNotFound first, as a local call would
        return await self.relay.ask(owner, job_id, call, args)

    async def pause(self, job_id: str) -> bool:
        """Pause the job's turn in the replica running it; False: none runs it but maybe this one."""
        owner = await self._owner(job_id)
        if owner is not None:
            await self._ask(owner, job_id, "pause")
        return owner is not None

    async def resume(self, job_id: str) -> bool:
        """Resume it there (as :meth:`pause`)."""
        owner = await self._owner(job_id)
        if owner is not None:
            await self._ask(owner, job_id, "resume")
        return owner is not None

    async def step(self, job_id: str) -> tuple[StepInfo, list[JobEvent]] | None:
        """One step there, and the events the job recorded meanwhile (None: not elsewhere)."""
        owner = await self._owner(job_id)
        if owner is None:
            return None
        from airlock.runner import StepInfo

        before = await self._events.store.events(job_id)
        info = await self._ask(owner, job_id, "step")
        assert isinstance(info, dict) and isinstance(info["tools"], list)
        did = StepInfo(
            complete=bool(info["complete"]), text=str(info["text"]), tools=[str(t) for t in info["tools"]]
        )
        after = before[-1].seq if before else 0
        return did, await self._events.store.events(job_id, after_seq=after)

    async def inspect(self, job_id: str) -> Inspection | None:
        """The job's session as the replica running it sees it (None: not elsewhere)."""
        owner = await self._owner(job_id)
        if owner is None:
            return None
        return _INSPECTION.validate_python(await self._ask(owner, job_id, "inspect"))

    async def deliver(self, job: Job, signal_type: str, data: JsonValue, sender: str | None) -> bool:
        """Hand a signal to the job's turn in the replica running it (False: none runs it)."""
        owner = await self._owner(job.id)
        if owner is None:
            return False
        args: dict[str, JsonValue] = {"signal_type": signal_type, "data": data, "sender": sender}
        return bool(await self._ask(owner, job.id, "deliver", **args))

    def _handlers(self) -> dict[str, Handler]:
        """What this replica runs when another relays a call on a job it runs."""

        async def pause(job_id: str, _: Mapping[str, JsonValue]) -> JsonValue:
            await self._local().pause(job_id)
            return None

        async def resume(job_id: str, _: Mapping[str, JsonValue]) -> JsonValue:
            await self._local().resume(job_id)
            return None

        async def step(job_id: str, _: Mapping[str, JsonValue]) -> JsonValue:
            info, _events = await self._local().step(job_id)
            return {"complete": info.complete, "text": info.text, "tools": list(info.tools)}

        async def inspect(job_id: str, _: Mapping[str, JsonValue]) -> JsonValue:
            seen: JsonValue = _INSPECTION.dump_python(await self._local().inspect(job_id), mode="json")
            return seen

        async def deliver(job_id: str, args: Mapping[str, JsonValue]) -> JsonValue:
            job = await self._events.get(job_id)
            sender = args.get("sender")
            return await self._local().deliver(
                job, str(args["signal_type"]), args.get("data"), sender if isinstance(sender, str) else None
            )

        return {"pause": pause, "resume": resume, "step": step, "inspect": inspect, "deliver": deliver}

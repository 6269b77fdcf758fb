"""JobLedger: which effects of a job tree were applied, so that none is applied twice.

A job's effects are applied by the replica holding it. When that replica dies while applying
them, another adopts the job and applies them again from the start of its output: the ledger
says which were applied already (their outcomes, by address, recorded before anyone hears of
them), which child job a delegate or handoff created (recorded in the transaction that
created it), and which signal was recorded (likewise). So a replayed delegate reuses its child
(or resumes it), a replayed signal is not counted twice, and memory writes (idempotent) are
fenced to the replica holding the job.
"""

from __future__ import annotations

from airlock.jobs import EffectOutcome

from ._store import JobStore

#: Ledger keys next to an effect's address: the child it created, the signal it recorded.
CHILD = "#child"
SIGNAL = "#signal"


class JobLedger:
    """The ledger of one job tree (``root``), read once when its effects are applied."""

    def __init__(self, store: JobStore, root: str, recorded: dict[str, str]) -> None:
        self._store = store
        self.root = root
        self._recorded = recorded

    @classmethod
    async def of(cls, store: JobStore, root: str, *, replay: bool) -> JobLedger:
        """The tree's ledger: as recorded (``replay``: its effects were applied before, maybe
        partly), or empty (a first application records as it goes)."""
        return cls(store, root, await store.effects_applied(root) if replay else {})

    def applied(self, address: str) -> EffectOutcome | None:
        """The outcome recorded for the effect at ``address`` (None: not applied)."""
        text = self._recorded.get(address)
        return EffectOutcome.model_validate_json(text) if text is not None else None

    async def record(self, address: str, outcome: EffectOutcome) -> None:
        """Record the effect at ``address`` as applied (refused: this replica lost the job)."""
        text = outcome.model_dump_json()
        await self._store.effect_applied(self.root, address, text)
        self._recorded[address] = text

    def child(self, address: str) -> str | None:
        """The child job the delegate or handoff at ``address`` created, if it did."""
        return self._recorded.get(address + CHILD)

    def key(self, address: str, kind: str) -> tuple[str, str]:
        """The ledger key (root, key) a store write records in its own transaction, of what the
        effect at ``address`` did (``kind``: CHILD or SIGNAL)."""
        return (self.root, address + kind)

    def signalled(self, address: str) -> bool:
        """Whether the signal effect at ``address`` was recorded."""
        return address + SIGNAL in self._recorded

"""Weaves kept in a layer0 ``StateStore``: one key per record, in storage order."""

from __future__ import annotations

from pydantic import ValidationError

from airlock.errors import AirlockError
from layer0 import Scope, StateStore

from ._record import TurnRecord

#: Positions are written as 8 digits so that the store's sorted keys are storage order.
POSITION_DIGITS = 8
MAX_POSITION = 10**POSITION_DIGITS - 1


class WeaveError(AirlockError):
    """A stored weave cannot be read back (a record that does not validate, a gap) or written."""


def _position_key(position: int) -> str:
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= MAX_POSITION:
        raise ValueError(f"a record's position must be an int from 0 to {MAX_POSITION}, got {position!r}")
    return f"{position:0{POSITION_DIGITS}d}"


def _is_position(key: str) -> bool:
    return len(key) == POSITION_DIGITS and key.isascii() and key.isdigit()


class WeaveStore:
    """The records of each weave in ``Scope.custom(f"weave:{root}")`` (``root``: the root job
    id), under the key ``f"{position:08d}"`` (0-based storage order), as their JSON."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    @staticmethod
    def scope(root: str) -> Scope:
        """Where the weave of root job ``root`` lives."""
        if not root:
            raise ValueError("a weave's root job id must not be empty")
        return Scope.custom(f"weave:{root}")

    async def append(self, root: str, record: TurnRecord, position: int) -> None:
        """Store ``record`` at ``position``. Storing the same record again is a no-op; a
        different record already there raises WeaveError (records are never overwritten)."""
        scope, key = self.scope(root), _position_key(position)
        value = record.model_dump(mode="json")
        existing = await self._store.read(scope, key)
        if existing is not None:
            if existing == value:
                return
            raise WeaveError(f"weave {root}: position {position} (key {key}) already holds another record")
        await self._store.write(scope, key, value)

    async def load(self, root: str, *, gaps: bool = False) -> list[TurnRecord]:
        """Every stored record of the weave, in storage order. A key that is not the next
        position (with ``gaps``: a key that is no position at all), or a value that is not a
        valid record, raises WeaveError naming the key. With ``gaps`` a deleted record is
        skipped: :func:`~._chain.verify` then names it from the records around it."""
        scope = self.scope(root)
        records: list[TurnRecord] = []
        for position, key in enumerate(await self._store.list(scope, "")):
            if gaps and _is_position(key):
                pass
            elif key != _position_key(position):
                raise WeaveError(
                    f"weave {root}: key {key!r} is where position {position} (key "
                    f"{_position_key(position)}) should be: a record is missing or a key is foreign"
                )
            value = await self._store.read(scope, key)
            if value is None:
                raise WeaveError(f"weave {root}: key {key} vanished while the weave was read")
            try:
                records.append(TurnRecord.model_validate(value))
            except ValidationError as e:
                raise WeaveError(f"weave {root}: the value under key {key} is not a valid record: {e}") from e
        return records

    async def drop(self, root: str) -> int:
        """Delete every stored record of the weave (retention); returns how many there were."""
        scope = self.scope(root)
        keys = await self._store.list(scope, "")
        for key in keys:
            await self._store.delete(scope, key)
        return len(keys)

    async def count(self, root: str) -> int:
        """How many records the weave has stored."""
        return len(await self._store.list(self.scope(root), ""))

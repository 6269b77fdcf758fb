"""Turn records: what a caller supplies (``RecordDraft``) and what the weave stores (``TurnRecord``)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from layer0 import Json, Money


class RecordType(StrEnum):
    """What a record is, coarsely: the agent spoke, acted, thought, yielded or stayed silent."""

    SPEECH = "speech"
    ACTION = "action"
    THOUGHT = "thought"
    YIELD = "yield"
    SILENCE = "silence"


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("a record's time must carry a time zone (UTC)")
    return value.astimezone(UTC)


#: An aware datetime, normalized to UTC.
UtcTime = Annotated[datetime, AfterValidator(_utc)]


class RecordDraft(BaseModel):
    """One step of a job as its caller describes it; :meth:`Weave.record` makes it a record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job: str = Field(min_length=1)
    agent: str = Field(min_length=1)
    type: RecordType
    kind: str = Field(min_length=1)
    depends_on: tuple[str, ...] = ()
    state_hash_pre: str = ""
    state_hash_post: str = ""
    content: Json = None
    tokens_in: int = Field(default=0, ge=0)
    tokens_out: int = Field(default=0, ge=0)
    cost: Money = Decimal(0)
    time: UtcTime


class TurnRecord(RecordDraft):
    """An immutable, hash-chained record of one step: its place in its thread (``n``), its
    Lamport ``clock``, its content's ``digest``, the ``hash`` of its thread's previous record
    (``prev_hash``), its own ``hash`` and, when the weave has a key, its ``seal``."""

    id: str = Field(min_length=1)
    n: int = Field(ge=1)
    clock: int = Field(ge=1)
    digest: str
    prev_hash: str | None
    hash: str
    seal: str | None = None

    def timeless(self) -> dict[str, Any]:
        """The record's JSON without ``time``, ``hash``, ``prev_hash`` and ``seal``: equal for
        the same step of two runs that differ only in timing."""
        return self.model_dump(mode="json", exclude={"time", "hash", "prev_hash", "seal"})

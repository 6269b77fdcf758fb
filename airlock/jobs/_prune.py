"""What ``PruneJobs`` removed (or, dry, would remove), and its wire form."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from airlock._proto.controller.v1 import controller_pb2 as cpb


class PruneSummary(BaseModel):
    """Finished jobs removed by a prune: trees (root jobs), jobs, their events, files (and bytes),
    checkpoints and workflows' signals."""

    model_config = ConfigDict(frozen=True)

    trees: int = 0
    jobs: int = 0
    events: int = 0
    files: int = 0
    bytes: int = 0
    checkpoints: int = 0
    signals: int = 0
    dry_run: bool = False
    #: A dry run's batch was full: more jobs are due than it counted.
    more: bool = False

    def to_proto(self) -> cpb.PruneJobsResponse:
        """The ``PruneJobsResponse``."""
        return cpb.PruneJobsResponse(**self.model_dump())

    @classmethod
    def from_proto(cls, message: cpb.PruneJobsResponse) -> PruneSummary:
        """From a ``PruneJobsResponse``."""
        return cls(**{name: getattr(message, name) for name in cls.model_fields})

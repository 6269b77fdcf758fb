"""The JobService's settings and limits, and the errors its API raises."""

from __future__ import annotations

from dataclasses import dataclass

from airlock.errors import AirlockError, ConfigError
from airlock.spec import AgentSpec
from layer0 import TurnInput


class JobNotFound(AirlockError):
    """No job has this id."""


class JobNotAwaiting(AirlockError):
    """The job is not in the state the request needs (e.g. an approval of a job that waits
    for none, a step of a job whose turn is not running)."""


class NotAnApprover(AirlockError):
    """The name given may not decide on this job's calls."""


@dataclass(frozen=True)
class ServiceSettings:
    """How the controller schedules and bounds jobs.

    Attributes:
        concurrency: jobs running at once (each holds one sandbox, children aside).
        default_max_duration_ms: a job's limit when neither the submitter nor its agent sets
            one.
        max_depth: levels of delegate/handoff children under a submitted job.
        max_follow_ups: children one submitted job may start in all (delegation loops stop).
        parallel_children: children of one job tree whose turns run at once (a turn's
            consecutive delegates run concurrently; the tenant's ``concurrent_jobs`` quota
            lowers it where it is smaller).
        lease_s: how long a controller replica that stopped renewing its lease (killed,
            paused, cut off) still holds its jobs before another adopts them; renewed every
            third of it.
        poll_s: how often an idle worker looks for a queued job without being woken (jobs
            queued through another replica wake it at once on PostgreSQL).
        sandbox_sweep_s: how often long-lived sandboxes idle past their TTL are looked for.
    """

    concurrency: int = 4
    default_max_duration_ms: int = 3_600_000
    max_depth: int = 4
    max_follow_ups: int = 16
    parallel_children: int = 4
    lease_s: float = 15.0
    poll_s: float = 1.0
    sandbox_sweep_s: float = 5.0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.max_depth < 0 or self.max_follow_ups < 0:
            raise ConfigError("max_depth and max_follow_ups must not be negative")
        if self.parallel_children < 1:
            raise ConfigError(f"parallel_children must be at least 1, got {self.parallel_children}")
        if self.lease_s <= 0 or self.poll_s <= 0 or self.sandbox_sweep_s <= 0:
            raise ConfigError("lease_s, poll_s and sandbox_sweep_s must be positive")


#: Extra time a job gets beyond its turn's ``max_duration`` (the input's, else its agent's)
#: by default (sandbox start, effects), when the submitter gives no ``max_duration``.
DEFAULT_SLACK_MS = 60_000


def job_limit_ms(agent: AgentSpec, input: TurnInput) -> int | None:
    """A job's limit: its turn's ``max_duration`` (the input's, else the agent's) plus slack."""
    turn = agent.max_duration_for(input)
    return turn + DEFAULT_SLACK_MS if turn is not None else None

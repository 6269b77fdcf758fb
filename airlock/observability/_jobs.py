"""JobMetrics: the job families, kept from the controller's own job events as they are recorded
(a listener of :meth:`airlock.controller.JobService` ``events.subscribe``), not from hooks."""

from __future__ import annotations

from airlock.jobs import Job, JobEvent, JobState, SandboxActivity, StateChanged
from airlock.proxy import EgressEvent
from airlock.turn import InferenceFinished, InferenceStarted

from ._families import Families

__all__ = ["JobMetrics"]

#: The model label of a call whose model the turn did not name.
UNKNOWN = "unknown"


class JobMetrics:
    """Updates ``families`` from each job event: call it with ``(event, job)``.

    It holds, per job not yet finished in this process, its state and labels and the model of
    its latest call (dropped when the job ends): what the gauge and the token counters need.
    """

    def __init__(self, families: Families) -> None:
        self.families = families
        self._jobs: dict[str, tuple[JobState, str, str]] = {}
        self._models: dict[str, str] = {}

    def __call__(self, event: JobEvent, job: Job | None) -> None:
        data = event.data
        if isinstance(data, StateChanged) and job is not None:
            self._changed(job, data)
        elif isinstance(data, SandboxActivity) and event.job_id in self._jobs:
            self._activity(event.job_id, data)

    def _changed(self, job: Job, change: StateChanged) -> None:
        f = self.families
        held = self._jobs.pop(job.id, None)
        if held is not None:
            f.jobs.labels(held[0].value, held[1], held[2]).dec()
        state = change.state
        first_start = (
            change.previous is JobState.QUEUED and state is JobState.PROVISIONING and not job.resumes
        )
        if first_start and job.started_at is not None:
            f.queue_wait.labels(job.agent).observe((job.started_at - job.created_at).total_seconds())
        if not state.terminal:
            self._jobs[job.id] = (state, job.agent, job.tenant)
            f.jobs.labels(state.value, job.agent, job.tenant).inc()
            return
        self._models.pop(job.id, None)
        f.jobs_finished.labels(state.value, job.agent, job.tenant).inc()
        if job.started_at is not None and job.finished_at is not None:
            f.run_duration.labels(job.agent).observe((job.finished_at - job.started_at).total_seconds())

    def _activity(self, job_id: str, activity: SandboxActivity) -> None:
        f, agent = self.families, self._jobs[job_id][1]
        event = activity.event
        if isinstance(event, InferenceStarted):
            self._models[job_id] = event.model or UNKNOWN
        elif isinstance(event, InferenceFinished):
            model = self._models.get(job_id, UNKNOWN)
            f.tokens.labels(agent, model, "input").inc(event.tokens_in)
            f.tokens.labels(agent, model, "output").inc(event.tokens_out)
            if event.cost is not None:
                f.cost.labels(agent, model).inc(float(event.cost))
        elif isinstance(event, EgressEvent) and event.phase == "decision":
            f.egress.labels(agent, "allowed" if event.allowed else "denied").inc()

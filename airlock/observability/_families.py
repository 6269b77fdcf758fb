"""The controller's metric families, on a registry of their own (never the global one).

Names use the ``airlock_`` prefix and base units; labels are bounded sets (states, agents,
tenants, backends, models: never a job id).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Families"]

#: Seconds buckets for waits and runs (a job: seconds to an hour).
_LONG = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: Seconds buckets for a sandbox start and a store transaction.
_SHORT = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Families:
    """Every metric family the controller exports, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.jobs = Gauge(
            "airlock_jobs",
            "Jobs not yet finished, store-wide (every replica reports all: aggregate with max)",
            ["state", "agent", "tenant"],
            registry=r,
        )
        self.jobs_finished = Counter(
            "airlock_jobs_finished",
            "Jobs that ended, by final state",
            ["state", "agent", "tenant"],
            registry=r,
        )
        self.queue_wait = Histogram(
            "airlock_job_queue_wait_seconds", "From submission to start", ["agent"], buckets=_LONG, registry=r
        )
        self.run_duration = Histogram(
            "airlock_job_run_duration_seconds", "From start to end", ["agent"], buckets=_LONG, registry=r
        )
        self.provision = Histogram(
            "airlock_sandbox_provision_seconds",
            "Until a job's sandbox is ready (cold: started for it; warm: claimed from a pool)",
            ["backend", "isolation", "start"],
            buckets=_SHORT,
            registry=r,
        )
        self.egress = Counter(
            "airlock_egress_decisions", "Egress proxy decisions", ["agent", "decision"], registry=r
        )
        self.tokens = Counter(
            "airlock_model_tokens", "Model tokens", ["agent", "model", "direction"], registry=r
        )
        self.cost = Counter(
            "airlock_model_cost_usd", "Model cost in US dollars", ["agent", "model"], registry=r
        )
        self.reaped = Counter(
            "airlock_reaper_removals", "Leftover sandbox objects the reaper removed", ["backend"], registry=r
        )
        self.enforcement = Gauge(
            "airlock_network_policy_enforcement",
            "The latest isolation proof's verdict (1 for its status, 0 for the others)",
            ["backend", "status"],
            registry=r,
        )
        self.store = Histogram(
            "airlock_store_operation_seconds",
            "One store transaction",
            ["store", "engine"],
            buckets=_SHORT,
            registry=r,
        )
        self.store_errors = Counter(
            "airlock_store_errors", "Store transactions that failed", ["store", "engine"], registry=r
        )

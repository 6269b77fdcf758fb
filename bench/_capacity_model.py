"""The capacity model of ``docs/capacity.md``: from per-job figures measured by
``bench/capacity.py`` to what N concurrent sandboxes need (API-server requests per second,
etcd objects and bytes, store transactions and rows, controller replicas) and which published
limit is reached first. Pure arithmetic (no I/O): ``tests/unit/test_capacity_model.py`` checks
it, and :func:`markdown` writes the doc's tables from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Published limits the model compares against (see docs/capacity.md for the sources).
#: kube-apiserver ``--max-requests-inflight`` (non-mutating) and ``--max-mutating-requests-inflight``.
APISERVER_INFLIGHT = 400
APISERVER_MUTATING_INFLIGHT = 200
#: API Priority and Fairness: the share of the server's 600 seats that the default
#: ``workload-low`` priority level (service accounts' requests) gets: 100 of 245 nominal shares.
WORKLOAD_LOW_SEATS = 600 * 100 // 245
#: "Considerations for large clusters": at most 110 pods per node, 150,000 pods, 5,000 nodes.
PODS_PER_NODE = 110
PODS_PER_CLUSTER = 150_000
NODES_PER_CLUSTER = 5_000
#: etcd's suggested maximum ``--quota-backend-bytes`` (its default is 2 GiB).
ETCD_QUOTA_BYTES = 8 * 2**30
#: Events a real kubelet and scheduler write per pod start and stop (Scheduled, Pulled, Created,
#: Started, Killing): the stand-in writes none of them, so the model adds these (kept 1 h by default).
EVENTS_PER_POD = 5
EVENT_BYTES = 1_000
#: Durable single-row transactions/s one PostgreSQL 15 took on the 2-core bench machine
#: (``bench/replicas.py``: ``JobStore.claim`` with three claimers), a floor for a real server.
STORE_COMMITS_S = 1_479


@dataclass(frozen=True)
class Measured:
    """What the bench measured, per job and per running job (one case: cold, warm or egress)."""

    #: API requests per job (start to teardown), by "verb resource".
    requests_per_job: dict[str, float]
    #: API requests per running sandbox per second (while its turn runs).
    requests_per_running_s: float
    #: Kubernetes objects per running sandbox by kind, and bytes per kind (JSON, as stored).
    objects_per_sandbox: dict[str, float]
    bytes_per_sandbox: float
    #: Store commits and rows written per job; commits per running job per second.
    commits_per_job: float
    rows_per_job: float
    rows_kept_per_job: float
    commits_per_running_s: float
    #: Controller CPU seconds per job (start and teardown) and per running job per second;
    #: MiB of RSS per running job, and an idle replica's.
    cpu_s_per_job: float
    cpu_per_running: float
    rss_mib_per_running: float
    rss_mib_base: float
    #: A replica's own API requests/s (its owner Lease, the reaper's sweeps).
    replica_requests_s: float = 0.0
    #: Store commits/s of one idle worker (each polls for a claim every second).
    idle_worker_commits_s: float = 0.0


@dataclass(frozen=True)
class Scenario:
    """N sandboxes at once, each job holding its sandbox ``job_s`` seconds on average; a burst
    starts ``burst`` of them within ``burst_s``; a controller pod has ``pod_cpu`` cores and
    ``pod_mib`` MiB, run at ``headroom`` of either; ``idle_workers``: the workers beyond those
    running (a fraction of ``concurrent``: the replicas' spare ``--concurrency``)."""

    concurrent: int
    job_s: float = 300.0
    burst_s: float = 60.0
    pod_cpu: float = 1.0
    pod_mib: float = 512.0
    headroom: float = 0.7
    pods_per_sandbox: float = 1.0
    idle_workers: float = 0.2


@dataclass(frozen=True)
class Limit:
    """One resource: what the scenario uses of it, the published limit, and their ratio."""

    name: str
    used: float
    limit: float
    note: str = ""

    @property
    def share(self) -> float:
        return self.used / self.limit if self.limit else math.inf


@dataclass(frozen=True)
class Needs:
    """What a scenario needs."""

    scenario: Scenario
    starts_s: float
    api_qps: float
    api_mutating_qps: float
    burst_qps: float
    burst_mutating_qps: float
    pods: float
    objects: float
    etcd_bytes: float
    store_tx_s: float
    store_rows_s: float
    rows_per_day: float
    controller_cpu: float
    controller_mib: float
    replicas: int
    limits: list[Limit] = field(default_factory=list)

    def first(self) -> Limit:
        """The limit with the largest share used."""
        return max(self.limits, key=lambda lim: lim.share)


MUTATING = ("create", "update", "patch", "delete", "deletecollection")


def mutating(requests: dict[str, float]) -> float:
    return sum(v for k, v in requests.items() if k.split(" ", 1)[0] in MUTATING)


def needs(m: Measured, s: Scenario, latency_s: float = 0.05) -> Needs:
    """What ``s`` needs from the per-job figures ``m``; ``latency_s``: a request's mean time in the
    API server (to turn QPS into seats in flight, Little's law)."""
    starts = s.concurrent / s.job_s
    per_job = sum(m.requests_per_job.values())
    mut = mutating(m.requests_per_job)
    cpu = starts * m.cpu_s_per_job + s.concurrent * m.cpu_per_running
    mib_needed = s.concurrent * m.rss_mib_per_running
    replicas = max(
        1,
        math.ceil(cpu / (s.pod_cpu * s.headroom)),
        math.ceil(mib_needed / (s.pod_mib * s.headroom - m.rss_mib_base)),
    )
    api = starts * per_job + s.concurrent * m.requests_per_running_s + replicas * m.replica_requests_s
    burst, burst_mut = s.concurrent * per_job / s.burst_s, s.concurrent * mut / s.burst_s
    pods = s.concurrent * s.pods_per_sandbox
    objects = (
        s.concurrent * sum(m.objects_per_sandbox.values())
        + starts * 3600 * EVENTS_PER_POD * s.pods_per_sandbox
    )
    etcd = (
        s.concurrent * m.bytes_per_sandbox + starts * 3600 * EVENTS_PER_POD * s.pods_per_sandbox * EVENT_BYTES
    )
    idle = s.concurrent * s.idle_workers * m.idle_worker_commits_s
    tx = starts * m.commits_per_job + s.concurrent * m.commits_per_running_s + idle
    found = Needs(
        s, starts, api, starts * mut, burst, burst_mut, pods, objects, etcd, tx,
        starts * m.rows_per_job, starts * 86400 * m.rows_kept_per_job, cpu, mib_needed, replicas,
    )  # fmt: skip
    found.limits.extend(limits(found, latency_s))
    return found


def limits(n: Needs, latency_s: float) -> list[Limit]:
    """The scenario against the published limits (a burst's requests in flight by Little's law)."""
    nodes = math.ceil(n.pods / PODS_PER_NODE)
    return [
        Limit("API seats in flight (burst), workload-low", n.burst_qps * latency_s, WORKLOAD_LOW_SEATS),
        Limit(
            "mutating requests in flight (burst)",
            n.burst_mutating_qps * latency_s,
            APISERVER_MUTATING_INFLIGHT,
        ),
        Limit("pods per cluster", n.pods, PODS_PER_CLUSTER),
        Limit("nodes (at 110 pods/node)", nodes, NODES_PER_CLUSTER),
        Limit("etcd MiB (8 GiB quota)", n.etcd_bytes / 2**20, ETCD_QUOTA_BYTES / 2**20),
        Limit("store commits/s (one PostgreSQL, 2 cores)", n.store_tx_s, STORE_COMMITS_S),
    ]


# -- the doc's tables -------------------------------------------------------------------------


def _n(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def needs_table(rows: list[tuple[str, Needs]]) -> list[str]:
    """A markdown table of what each (label, needs) needs."""
    head = (
        "| case | sandboxes | starts/s | API QPS | mutating QPS | burst QPS | pods | objects | etcd MiB "
        "| store tx/s | rows/day | controller CPU | RSS MiB | replicas |"
    )
    lines = [head, "|---" * 14 + "|"]
    for label, n in rows:
        cells = [
            label, f"{n.scenario.concurrent:,}", _n(n.starts_s), _n(n.api_qps), _n(n.api_mutating_qps),
            _n(n.burst_qps), f"{n.pods:,.0f}", f"{n.objects:,.0f}", _n(n.etcd_bytes / 2**20),
            _n(n.store_tx_s), f"{n.rows_per_day:,.0f}", _n(n.controller_cpu), _n(n.controller_mib),
            str(n.replicas),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def limits_table(rows: list[tuple[str, Needs]]) -> list[str]:
    """A markdown table: each scenario's use of each limit, the first reached in bold."""
    lines = ["| case | sandboxes | limit | used | limit | share |", "|---|---|---|---|---|---|"]
    for label, n in rows:
        first = n.first()
        for lim in n.limits:
            name = f"**{lim.name}**" if lim is first else lim.name
            cells = [
                label,
                f"{n.scenario.concurrent:,}",
                name,
                _n(lim.used),
                _n(lim.limit),
                f"{lim.share:.1%}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(
    measured: dict[str, Measured], sizes: tuple[int, ...] = (1_000, 10_000), **scenario: float
) -> str:
    """The doc's two tables for each measured case at each size."""
    rows: list[tuple[str, Needs]] = []
    for label, m in measured.items():
        pods = m.objects_per_sandbox.get("pods", 1.0)
        for size in sizes:
            rows.append((label, needs(m, Scenario(size, pods_per_sandbox=pods, **scenario))))
    return "\n".join([*needs_table(rows), "", *limits_table(rows)])

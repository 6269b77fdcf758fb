"""The capacity model of docs/capacity.md (``bench/_capacity_model.py``) on made-up per-job figures
computed by hand, and how ``bench/capacity.py`` names a stand-in request (verb, resource)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import _capacity_model as model
from bench._capacity_probe import classify

MEASURED = model.Measured(
    requests_per_job={"create pods": 1.0, "get pods": 9.0, "delete pods": 2.0},
    requests_per_running_s=0.01,
    objects_per_sandbox={"pods": 1.0, "secrets": 1.0, "networkpolicies": 1.0},
    bytes_per_sandbox=8_000.0,
    commits_per_job=70.0,
    rows_per_job=30.0,
    rows_kept_per_job=20.0,
    commits_per_running_s=0.0,
    cpu_s_per_job=0.1,
    cpu_per_running=0.0,
    rss_mib_per_running=0.3,
    rss_mib_base=150.0,
    replica_requests_s=0.05,
    idle_worker_commits_s=1.0,
)
#: 10 starts/s; a pod of 1 core and 500 MiB used to half: 0.5 core, 250 - 150 = 100 MiB of jobs.
SCENARIO = model.Scenario(1_000, job_s=100.0, burst_s=50.0, pod_cpu=1.0, pod_mib=500.0, headroom=0.5)


def test_needs_from_per_job_figures() -> None:
    n = model.needs(MEASURED, SCENARIO, latency_s=0.05)
    assert n.starts_s == 10.0
    assert n.controller_cpu == pytest.approx(1.0)  # 10 starts/s x 0.1 s
    assert n.controller_mib == pytest.approx(300.0)  # 1,000 x 0.3 MiB
    assert n.replicas == 3  # memory: 300 / 100 (CPU alone: 1.0 / 0.5 = 2)
    assert n.api_qps == pytest.approx(10 * 12 + 1_000 * 0.01 + 3 * 0.05)
    assert n.api_mutating_qps == pytest.approx(10 * 3)
    assert n.burst_qps == pytest.approx(1_000 * 12 / 50)
    assert n.burst_mutating_qps == pytest.approx(1_000 * 3 / 50)
    # Live objects, and the kubelet's Events of the last hour (5 per pod start, 1 kB each).
    assert n.objects == pytest.approx(3_000 + 10 * 3_600 * 5)
    assert n.etcd_bytes == pytest.approx(1_000 * 8_000 + 10 * 3_600 * 5 * 1_000)
    assert n.store_tx_s == pytest.approx(10 * 70 + 1_000 * 0.2 * 1.0)  # 200 idle workers' polls
    assert n.rows_per_day == pytest.approx(10 * 86_400 * 20)


def test_the_first_limit_is_the_largest_share() -> None:
    n = model.needs(MEASURED, SCENARIO, latency_s=0.05)
    shares = {lim.name: lim.share for lim in n.limits}
    assert shares["API seats in flight (burst), workload-low"] == pytest.approx(240 * 0.05 / 244)
    assert shares["nodes (at 110 pods/node)"] == pytest.approx(math.ceil(1_000 / 110) / 5_000)
    assert n.first().name == "store commits/s (one PostgreSQL, 2 cores)"  # 900 of 1,479
    tenfold = model.needs(
        MEASURED, model.Scenario(10_000, job_s=100.0, burst_s=2.0, idle_workers=0.0), latency_s=0.05
    )
    assert tenfold.first().name.startswith("API seats")  # 60,000 QPS x 50 ms = 3,000 seats


def test_a_proxy_pod_per_sandbox_doubles_the_pods() -> None:
    n = model.needs(MEASURED, model.Scenario(1_000, pods_per_sandbox=2.0))
    assert n.pods == 2_000
    assert n.objects == pytest.approx(3_000 + 1_000 / 300 * 3_600 * 5 * 2)


def test_the_docs_tables_come_from_the_model() -> None:
    text = model.markdown({"cold": MEASURED}, sizes=(1_000,), job_s=100.0, burst_s=50.0)
    needs_row = next(line for line in text.splitlines() if line.startswith("| cold | 1,000 | 10.0 |"))
    assert "| 130 |" in needs_row  # API QPS 130.15
    assert "| 240 |" in needs_row  # burst QPS
    assert "**store commits/s (one PostgreSQL, 2 cores)**" in text


@pytest.mark.parametrize(
    ("method", "path", "key"),
    [
        ("GET", "/api/v1/namespaces/ns/pods/p", ("get", "pods")),
        ("GET", "/api/v1/namespaces/ns/pods", ("list", "pods")),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", ("get", "pods/log")),
        ("POST", "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies", ("create", "networkpolicies")),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("update", "leases")),
        ("PATCH", "/api/v1/namespaces/ns/pods/p", ("patch", "pods")),
        ("DELETE", "/api/v1/namespaces/ns/secrets/s", ("delete", "secrets")),
        ("DELETE", "/api/v1/namespaces/ns/secrets", ("deletecollection", "secrets")),
        ("GET", "/api/v1/namespaces/ns", ("get", "namespaces")),
    ],
)
def test_requests_are_named_as_the_authorizer_names_them(
    method: str, path: str, key: tuple[str, str]
) -> None:
    assert classify(method, path) == key


def test_the_docs_tables_are_the_stored_run_through_the_model() -> None:
    """docs/capacity.md shows what the model makes of its run (docs/capacity.json), line for line."""
    root = Path(__file__).resolve().parents[2]
    doc = json.loads((root / "docs" / "capacity.json").read_text(encoding="utf-8"))
    measured = {name: model.Measured(**m) for name, m in doc["load"]["measured"].items()}
    text = (root / "docs" / "capacity.md").read_text(encoding="utf-8")
    missing = [line for line in model.markdown(measured).splitlines() if line and line not in text]
    assert missing == []

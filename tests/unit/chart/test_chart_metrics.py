"""The chart's metrics add-ons: every metric the dashboard and the alerts query is one the
controller exports; the ServiceMonitor scrapes the Service's metrics port only."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

from airlock.observability import Metrics
from tests.support.helm import CHART, objects, render

ON = (
    "metrics.serviceMonitor.enabled=true",
    "metrics.grafanaDashboard.enabled=true",
    "metrics.prometheusRule.enabled=true",
)
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def exported() -> set[str]:
    """Every series name the controller's registry exposes (the pool families included)."""
    metrics = Metrics()
    runner = SimpleNamespace(pool_stats=dict)
    metrics.attach(SimpleNamespace(events=SimpleNamespace(subscribe=lambda _: lambda: None), runner=runner))  # type: ignore[arg-type]
    return {m.name + s for m in metrics.registry.collect() for s in SUFFIXES[m.type]}


def names(expr: str) -> set[str]:
    unquoted = re.sub(r'"[^"]*"', '""', expr)
    return set(re.findall(r"\bairlock_[A-Za-z0-9_]+", unquoted))


def by_kind(text: str) -> dict[str, dict[str, Any]]:
    return {o["kind"] + "/" + o["metadata"]["name"]: o for o in objects(text)}


def test_every_dashboard_query_names_an_exported_metric() -> None:
    dashboard = json.loads((CHART / "dashboards" / "airlock.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert len(exprs) > 15
    known = exported()
    for expr in exprs:
        assert names(expr) and names(expr) <= known, expr


def test_every_alert_names_an_exported_metric() -> None:
    rule = by_kind(render(sets=ON))["PrometheusRule/rel-airlock"]
    alerts = rule["spec"]["groups"][0]["rules"]
    assert {a["alert"] for a in alerts} >= {
        "AirlockJobsFailing",
        "AirlockStoreErrors",
        "AirlockPoolExhausted",
    }
    known = exported()
    for a in alerts:
        assert names(a["expr"]) and names(a["expr"]) <= known, a["expr"]
        assert a["labels"]["severity"] and a["for"] and a["annotations"]["summary"]


def test_the_service_monitor_scrapes_the_services_metrics_port() -> None:
    found = by_kind(render(sets=ON))
    monitor, service = found["ServiceMonitor/rel-airlock"], found["Service/rel-airlock"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}
    args = found["Deployment/rel-airlock"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--metrics-address") + 1] == "0.0.0.0:9464"
    assert args[args.index("--log-format") + 1] == "json"
    dashboard = found["ConfigMap/rel-airlock-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    json.loads(dashboard["data"]["airlock.json"])


def test_metrics_off_renders_no_metrics_port() -> None:
    found = by_kind(render(sets=("metrics.enabled=false",)))
    args = found["Deployment/rel-airlock"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metrics-address" not in args
    assert "metrics" not in {p["name"] for p in found["Service/rel-airlock"]["spec"]["ports"]}

"""The chart serves the HTTP/JSON API and the console: the controller listens on the web port
on all interfaces (not the loopback default, unreachable in a pod), the Service publishes it
(https with the controller's TLS), the NetworkPolicy admits it from whom gRPC admits and from
web.networkPolicyFrom; web.enabled=false serves none."""

from __future__ import annotations

from typing import Any

from tests.support.helm import objects, render


def by_kind(text: str) -> dict[str, dict[str, Any]]:
    return {o["kind"] + "/" + o["metadata"]["name"]: o for o in objects(text)}


def controller(rendered: dict[str, dict[str, Any]]) -> dict[str, Any]:
    pod = rendered["Deployment/rel-airlock"]["spec"]["template"]["spec"]
    container: dict[str, Any] = next(c for c in pod["containers"] if c["name"] == "controller")
    return container


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_console_is_served_on_the_web_port_and_published() -> None:
    rendered = by_kind(render())
    c = controller(rendered)
    assert flag(c["args"], "--http-address") == "0.0.0.0:8480"
    assert {"name": "http", "containerPort": 8480, "protocol": "TCP"} in c["ports"]
    ports = {p["name"]: p for p in rendered["Service/rel-airlock"]["spec"]["ports"]}
    assert ports["http"]["port"] == 8480 and ports["http"]["targetPort"] == "http"
    assert ports["http"]["appProtocol"] == "http"


def test_with_tls_the_console_is_https() -> None:
    tls = ("controller.tls.enabled=true", "controller.tls.existingSecret=airlock-tls", "web.port=8443")
    rendered = by_kind(render(sets=tls))
    assert flag(controller(rendered)["args"], "--http-address") == "0.0.0.0:8443"
    ports = {p["name"]: p for p in rendered["Service/rel-airlock"]["spec"]["ports"]}
    assert ports["http"]["appProtocol"] == "https" and ports["http"]["port"] == 8443


def test_web_disabled_serves_no_http_api() -> None:
    rendered = by_kind(render(sets=("web.enabled=false",)))
    c = controller(rendered)
    assert flag(c["args"], "--http-address") == "off"
    assert all(p["name"] != "http" for p in c["ports"])
    assert all(p["name"] != "http" for p in rendered["Service/rel-airlock"]["spec"]["ports"])


def test_the_network_policy_admits_the_web_port_from_the_api_clients_and_its_own_peers() -> None:
    sets = (
        "controller.networkPolicy.enabled=true",
        "controller.networkPolicy.from[0].namespaceSelector.matchLabels.team=ml",
        "web.networkPolicyFrom[0].namespaceSelector.matchLabels.ingress=yes",
    )
    policy = by_kind(render(sets=sets))["NetworkPolicy/rel-airlock-controller"]
    rule = next(r for r in policy["spec"]["ingress"] if r["ports"] == [{"port": "http", "protocol": "TCP"}])
    labels = [p.get("namespaceSelector", {}).get("matchLabels") for p in rule["from"]]
    assert labels == [None, {"team": "ml"}, {"ingress": "yes"}]


def test_tracing_points_the_controller_at_a_collector_with_its_headers_from_a_secret() -> None:
    assert "env" not in controller(by_kind(render()))  # SQLite, no tracing: nothing to set
    sets = (
        "tracing.endpoint=http://otel-collector.observability:4318",
        "tracing.resourceAttributes=deployment.environment=prod",
        "tracing.headersSecret.name=otel-auth",
    )
    env = {e["name"]: e for e in controller(by_kind(render(sets=sets)))["env"]}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability:4318"
    assert env["OTEL_SERVICE_NAME"]["value"] == "airlock-controller"
    assert env["OTEL_RESOURCE_ATTRIBUTES"]["value"] == "deployment.environment=prod"
    assert env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"]["secretKeyRef"] == {
        "name": "otel-auth",
        "key": "headers",
    }

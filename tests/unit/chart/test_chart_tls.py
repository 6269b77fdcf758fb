"""The chart's TLS on the jobs API: an existing kubernetes.io/tls Secret or a cert-manager
Certificate, mounted read-only into the controller and passed as ``--tls-*``; probes that work
with TLS; mutual TLS; the LoadBalancer example uses it; NOTES say how to connect.

The cert-manager Certificate is a CRD object the official Kubernetes schemas do not know: it
is checked field by field here; every other object is validated as the render tests do.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.support.helm import CHART, helm, objects, render, render_notes

EXAMPLE = CHART / "examples" / "external-secrets.yaml"
CERT_MANAGER = (
    "controller.tls.enabled=true",
    "controller.tls.certManager.enabled=true",
    "controller.tls.certManager.issuerRef.name=airlock-ca",
    "controller.tls.certManager.issuerRef.kind=ClusterIssuer",
    "controller.tls.certManager.dnsNames[0]=airlock.example.com",
)
#: CRD kinds the chart may render, beyond the official schemas.
CRDS = {("cert-manager.io/v1", "Certificate")}


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def controller(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {"pod": deployment["spec"]["template"]["spec"], "container": container}


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_the_load_balancer_example_serves_tls_from_its_secret() -> None:
    found = controller(objects(render(EXAMPLE)))
    args = found["container"]["args"]
    assert flag(args, "--tls-cert") == "/var/run/airlock/tls/tls.crt"
    assert flag(args, "--tls-key") == "/var/run/airlock/tls/tls.key"
    assert "--tls-client-ca" not in args
    volumes = {v["name"]: v for v in found["pod"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "airlock-api-tls"
    assert {i["key"] for i in volumes["tls"]["secret"]["items"]} == {"tls.crt", "tls.key"}
    mount = next(m for m in found["container"]["volumeMounts"] if m["name"] == "tls")
    assert mount == {"name": "tls", "mountPath": "/var/run/airlock/tls", "readOnly": True}
    # the kubelet's gRPC probe cannot speak TLS: the port is checked instead
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert found["container"][probe]["tcpSocket"] == {"port": 7878}
        assert "grpc" not in found["container"][probe]


def test_without_tls_nothing_changes() -> None:
    found = controller(objects(render()))
    assert "--tls-cert" not in found["container"]["args"]
    assert found["container"]["readinessProbe"]["grpc"] == {"port": 7878}
    assert "tls" not in {v["name"] for v in found["pod"]["volumes"]}


def test_cert_manager_issues_the_certificate_the_controller_mounts() -> None:
    docs = objects(render(sets=CERT_MANAGER))
    (certificate,) = of_kind(docs, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    spec = certificate["spec"]
    assert spec["secretName"] == "rel-airlock-tls"
    assert spec["issuerRef"] == {"name": "airlock-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert spec["dnsNames"] == [
        "airlock.example.com",
        "rel-airlock",
        "rel-airlock.airlock",
        "rel-airlock.airlock.svc",
        "rel-airlock.airlock.svc.cluster.local",
    ]
    assert spec["duration"] == "2160h" and spec["renewBefore"] == "360h"
    assert spec["privateKey"] == {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
    assert "server auth" in spec["usages"]
    volumes = {v["name"]: v for v in controller(docs)["pod"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "rel-airlock-tls"
    for obj in docs:
        if (obj["apiVersion"], obj["kind"]) in CRDS:
            continue
        kubernetes_validate.validate(obj, str(kubernetes_validate.latest_version()), strict=True)


def test_an_existing_secret_wins_over_cert_manager() -> None:
    docs = objects(render(sets=(*CERT_MANAGER, "controller.tls.existingSecret=mine")))
    assert not of_kind(docs, "Certificate")
    volumes = {v["name"]: v for v in controller(docs)["pod"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "mine"


@pytest.mark.parametrize(
    ("extra", "secret", "key"),
    [
        ((), "rel-airlock-tls", "ca.crt"),
        (("controller.tls.clientCA.existingSecret=clients",), "clients", "ca.crt"),
    ],
)
def test_mutual_tls_mounts_the_client_ca(extra: tuple[str, ...], secret: str, key: str) -> None:
    docs = objects(render(sets=(*CERT_MANAGER, "controller.tls.clientCA.enabled=true", *extra)))
    found = controller(docs)
    assert flag(found["container"]["args"], "--tls-client-ca") == "/var/run/airlock/tls-client-ca/ca.crt"
    volumes = {v["name"]: v for v in found["pod"]["volumes"]}
    assert volumes["tls-client-ca"]["secret"]["secretName"] == secret
    assert volumes["tls-client-ca"]["secret"]["items"] == [{"key": key, "path": "ca.crt"}]
    mounts = {m["name"]: m for m in found["container"]["volumeMounts"]}
    assert mounts["tls-client-ca"]["readOnly"] is True


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("controller.tls.enabled=true",), "controller.tls.existingSecret"),
        (
            ("controller.tls.enabled=true", "controller.tls.certManager.enabled=true"),
            "controller.tls.certManager.issuerRef.name",
        ),
        (("controller.tls.certManager.issuerRef.kind=Cluster",), "kind"),
        (("controller.tls.certManager.duration=90d",), "duration"),
    ],
)
def test_incomplete_tls_values_are_refused(sets: tuple[str, ...], message: str) -> None:
    args = ["template", "rel", str(CHART), "-n", "airlock"]
    for item in sets:
        args += ["--set", item]
    done = helm(*args, check=False)
    assert done.returncode != 0 and message in done.stderr


def test_notes_say_how_to_reach_the_api_over_tls() -> None:
    text = render_notes(EXAMPLE)
    assert "(TLS)" in text
    assert "get secret airlock-api-tls" in text and "AIRLOCK_TLS_CA" in text
    assert "AIRLOCK_TLS_SERVER_NAME=rel-airlock.airlock.svc" in text
    assert "WITHOUT TLS" not in text and "in clear" not in text


def test_notes_warn_about_a_published_api_without_tls() -> None:
    assert "in clear" in render_notes(sets=("controller.service.type=LoadBalancer",))
    assert "in clear" not in render_notes()

"""The access table: every request is read as the API server reads it, and one outside the
table is refused before anything is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from airlock.sandbox.kubernetes import DOCTOR_ACCESS, SANDBOX_ACCESS, Access, KubernetesSettings
from airlock.sandbox.kubernetes._access import (
    ANY_NAMESPACE,
    AccessRefused,
    AccessTable,
    Permission,
    request_permissions,
    resolve,
)
from airlock.sandbox.kubernetes._api import KubeApi
from airlock.testing import KubeApiStandIn

NS = "airlock-sandboxes"


@pytest.fixture
def standin() -> Iterator[KubeApiStandIn]:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        yield api


def settings_for(api: KubeApiStandIn, tmp_path: Path, **kw: object) -> KubernetesSettings:
    return KubernetesSettings(namespace=NS, kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")), **kw)


@pytest.mark.parametrize(
    ("method", "path", "needs"),
    [
        ("POST", "/api/v1/namespaces/{namespace}/pods", [("create", "", "pods", NS, None)]),
        ("GET", "/api/v1/namespaces/{namespace}/pods", [("list", "", "pods", NS, None)]),
        ("PATCH", "/api/v1/namespaces/{namespace}/pods/{name}", [("patch", "", "pods", NS, "p")]),
        ("GET", "/api/v1/namespaces/{namespace}/pods/{name}/log", [("get", "", "pods/log", NS, "p")]),
        (
            "GET",
            "/api/v1/namespaces/{namespace}/pods/{name}/portforward",
            [("get", "", "pods/portforward", NS, "p"), ("create", "", "pods/portforward", NS, "p")],
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            [("update", "coordination.k8s.io", "leases", NS, "p")],
        ),
        (
            "GET",
            "/apis/node.k8s.io/v1/runtimeclasses/{name}",
            [("get", "node.k8s.io", "runtimeclasses", None, "p")],
        ),
        ("GET", "/api/v1/namespaces/{name}", [("get", "", "namespaces", None, "p")]),
        ("PATCH", "/api/v1/namespaces/{name}", [("patch", "", "namespaces", None, "p")]),
        ("PUT", "/api/v1/namespaces/{name}/status", [("update", "", "namespaces/status", None, "p")]),
        ("GET", "/version/", [("get", "", "/version", None, None)]),
    ],
)
def test_a_request_needs_what_the_api_server_checks(
    method: str, path: str, needs: list[tuple[str, str, str, str | None, str | None]]
) -> None:
    assert request_permissions(method, path, {"namespace": NS, "name": "p"}) == tuple(
        Permission(*need) for need in needs
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/v1"), ("POST", "/version/"), ("GET", "/api/v1/namespaces/n/pods/p/log/x")],
)
def test_a_request_it_cannot_read_is_refused_not_guessed(method: str, path: str) -> None:
    with pytest.raises(AccessRefused, match="not a request airlock can read the permission of"):
        request_permissions(method, path)


async def test_an_unlisted_call_is_refused_and_nothing_reaches_the_server(
    standin: KubeApiStandIn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(standin, tmp_path, connect="pod_ip")
    api = await KubeApi.connect(settings, SANDBOX_ACCESS)
    sent = len(standin.requests)
    try:
        refused = [
            # not in the table at all
            api.call(api.core.list_namespaced_config_map, NS),
            # a verb the table lacks (doctor's get secrets is not the backend's)
            api.call(api.core.read_namespaced_secret, "pull", NS),
            # a listed verb, but in another namespace
            api.call(api.core.create_namespaced_pod, "elsewhere", {"metadata": {"name": "x"}}),
            # a RuntimeClass the settings do not name
            api.call(api.node.read_runtime_class, "runc-unlimited"),
            # another namespace object than the sandbox namespace
            api.call(api.core.read_namespace, "kube-system"),
            # a direct client call, without KubeApi.call
            asyncio.to_thread(api.core.read_namespaced_pod_log, "p", "elsewhere"),
            # a port-forward while connecting by pod IP
            asyncio.to_thread(api.port_forward_blocking, "p", NS, 50051),
        ]
        results = await asyncio.gather(*refused, return_exceptions=True)
    finally:
        api.close()
    assert [type(r) for r in results] == [AccessRefused] * len(refused), results
    assert "list configmaps in namespace airlock-sandboxes" in str(results[0])
    assert "SANDBOX_ACCESS" in str(results[0])
    assert "create pods/portforward" in str(results[-1]) or "get pods/portforward" in str(results[-1])
    assert standin.requests[sent:] == []
    assert len([r for r in caplog.records if r.name.endswith(".access")]) == len(refused)
    caplog.clear()  # the refusals were the point (the autouse check would fail on them)


def test_port_forward_mode_adds_get_and_create_on_pods_portforward() -> None:
    settings = KubernetesSettings(namespace=NS)
    by_mode = {mode: resolve(SANDBOX_ACCESS, settings, mode).grants for mode in ("pod_ip", "port_forward")}
    extra = set(by_mode["port_forward"]) - set(by_mode["pod_ip"])
    assert {(g.verb, g.resource) for g in extra} == {
        ("get", "pods/portforward"),
        ("create", "pods/portforward"),
    }
    assert set(by_mode["pod_ip"]) < set(by_mode["port_forward"])


def test_named_entries_resolve_to_the_configured_names_and_never_to_all() -> None:
    settings = KubernetesSettings(namespace=NS, image_pull_secrets=("registry-pull",))
    grants = {
        (g.verb, g.resource): g for g in resolve(SANDBOX_ACCESS + DOCTOR_ACCESS, settings, "pod_ip").grants
    }
    assert grants[("get", "runtimeclasses")].names == ("gvisor", "kata")
    assert grants[("get", "runtimeclasses")].namespace is None
    assert grants[("get", "namespaces")].names == (NS,)
    assert grants[("get", "secrets")].names == ("registry-pull",)
    assert grants[("get", "secrets")].namespace == NS
    # no pull Secrets: no grant at all (an empty resourceNames would mean every Secret)
    bare = resolve(DOCTOR_ACCESS, KubernetesSettings(namespace=NS), "pod_ip").grants
    assert ("get", "secrets") not in {(g.verb, g.resource) for g in bare}


def test_a_cluster_scoped_entry_with_names_is_one_line() -> None:
    """What the isolation check will add (patch the sandbox namespace) fits one Access."""
    table = AccessTable("test", (Access("patch", "", "namespaces", cluster=True, names="sandbox_namespace"),))
    (grant,) = resolve(table, KubernetesSettings(namespace=NS), "pod_ip").grants
    assert grant.allows(Permission("patch", "", "namespaces", None, NS))
    assert not grant.allows(Permission("patch", "", "namespaces", None, "default"))
    assert not grant.allows(Permission("patch", "", "namespaces", NS, NS))


def test_any_namespace_is_only_for_the_operators_own_identity() -> None:
    table = AccessTable("test", (Access("create", "", "pods"),))
    (anywhere,) = resolve(table, KubernetesSettings(namespace=NS), "pod_ip", namespace=ANY_NAMESPACE).grants
    assert anywhere.allows(Permission("create", "", "pods", "airlock"))
    assert not anywhere.allows(Permission("create", "", "pods", None))

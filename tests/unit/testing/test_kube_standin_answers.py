"""The stand-in API server answers the official client as the real one does: the objects it
keeps, and the error codes and Status reasons it refuses with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from airlock.testing import KubeApiStandIn

NS = "team"


@pytest.fixture
def api() -> Iterator[KubeApiStandIn]:
    with KubeApiStandIn(namespaces=(NS,)) as server:
        yield server


@pytest.fixture
def core(api: KubeApiStandIn) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(api.configuration()))


def secret(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": labels}}


def refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(ApiException) as info:
        call()
    status = json.loads(info.value.body)
    assert (
        status["kind"] == "Status" and status["status"] == "Failure" and status["code"] == info.value.status
    )
    return info.value.status, status["reason"]


def test_create_get_list_delete_and_the_codes_of_each_refusal(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_secret(NS, secret("a", app="x"))
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.namespace == NS
    assert core.read_namespaced_secret("a", NS).metadata.uid == created.metadata.uid
    assert refusal(lambda: core.create_namespaced_secret(NS, secret("a"))) == (409, "AlreadyExists")
    assert refusal(lambda: core.read_namespaced_secret("b", NS)) == (404, "NotFound")
    assert refusal(lambda: core.create_namespaced_secret("nowhere", secret("c"))) == (404, "NotFound")
    assert refusal(lambda: core.create_namespaced_secret(NS, secret("Not_A_Name"))) == (422, "Invalid")
    core.create_namespaced_secret(NS, secret("b", app="y"))
    assert [s.metadata.name for s in core.list_namespaced_secret(NS, label_selector="app=x").items] == ["a"]
    assert [s.metadata.name for s in core.list_namespaced_secret(NS, label_selector="app!=x").items] == ["b"]
    core.delete_namespaced_secret("a", NS)
    assert refusal(lambda: core.delete_namespaced_secret("a", NS)) == (404, "NotFound")


def test_an_object_the_official_schema_refuses_is_invalid(api: KubeApiStandIn) -> None:
    # the official client 37 refuses such a body itself, so it is sent as raw HTTP here
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"nam": "x"}]},
    }
    answer = httpx.post(
        f"{api.url}/api/v1/namespaces/{NS}/pods", json=bad, headers={"Authorization": f"Bearer {api.token}"}
    )
    status = answer.json()
    assert (answer.status_code, status["reason"], status["code"]) == (422, "Invalid", 422)
    assert "nam" in status["message"]
    assert api.objects("pods", NS) == []


def test_rbac_denials_and_self_subject_access_reviews_agree(
    api: KubeApiStandIn, core: client.CoreV1Api
) -> None:
    api.deny("create", "secrets")
    assert refusal(lambda: core.create_namespaced_secret(NS, secret("s"))) == (403, "Forbidden")
    authz = client.AuthorizationV1Api(core.api_client)

    def allowed(verb: str) -> bool:
        body = {"spec": {"resourceAttributes": {"namespace": NS, "verb": verb, "resource": "secrets"}}}
        return bool(authz.create_self_subject_access_review(body).status.allowed)

    assert not allowed("create") and allowed("list")


def test_a_stale_lease_update_is_a_conflict(core: client.CoreV1Api) -> None:
    leases = client.CoordinationV1Api(core.api_client)
    body = {"metadata": {"name": "owner"}, "spec": {"holderIdentity": "h", "leaseDurationSeconds": 60}}
    first = leases.create_namespaced_lease(NS, body)
    fresh = {**body, "metadata": {"name": "owner", "resourceVersion": first.metadata.resource_version}}
    leases.replace_namespaced_lease("owner", NS, fresh)
    assert refusal(lambda: leases.replace_namespaced_lease("owner", NS, fresh)) == (409, "Conflict")


def test_deleting_an_owner_deletes_what_it_owns(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_secret(NS, secret("owner"))
    ref = {"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": owner.metadata.uid}
    dependent = secret("dependent")
    dependent["metadata"]["ownerReferences"] = [ref]
    core.create_namespaced_secret(NS, dependent)
    core.create_namespaced_secret(NS, secret("bystander"))
    core.delete_namespaced_secret("owner", NS)
    assert [s.metadata.name for s in core.list_namespaced_secret(NS).items] == ["bystander"]


def test_without_the_token_nothing_is_answered(api: KubeApiStandIn) -> None:
    configuration = api.configuration()
    configuration.api_key = {}
    anonymous = client.CoreV1Api(client.ApiClient(configuration))
    assert refusal(lambda: anonymous.list_namespaced_secret(NS)) == (401, "Unauthorized")


def test_a_pod_deleted_with_a_grace_period_stays_terminating_until_it_ends() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    with KubeApiStandIn(namespaces=(NS,), pod_termination_s=3600) as api:
        core = client.CoreV1Api(client.ApiClient(api.configuration()))
        core.create_namespaced_pod(NS, pod)
        core.delete_namespaced_pod("p", NS, grace_period_seconds=5)
        lingering = core.read_namespaced_pod("p", NS)  # its kubelet has not confirmed yet
        assert lingering.metadata.deletion_timestamp and lingering.metadata.deletion_grace_period_seconds == 5
        assert api.removals == []
        core.delete_namespaced_pod("p", NS, grace_period_seconds=0)  # forced: gone at once
        assert refusal(lambda: core.read_namespaced_pod("p", NS)) == (404, "NotFound")
        assert api.deletions == [("pods", "p", 5), ("pods", "p", 0)] and api.removals == [("pods", "p")]
    with KubeApiStandIn(namespaces=(NS,), pod_termination_s=1e-9) as api:  # the kubelet confirms at once
        core = client.CoreV1Api(client.ApiClient(api.configuration()))
        core.create_namespaced_pod(NS, pod)
        core.delete_namespaced_pod("p", NS, grace_period_seconds=5)
        assert refusal(lambda: core.read_namespaced_pod("p", NS)) == (404, "NotFound")

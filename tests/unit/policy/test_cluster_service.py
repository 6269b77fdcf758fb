"""In-cluster Service destinations, decided without traffic: the Service's names (and only
they) are admitted on its port, and the private address they resolve to is granted for that
name and port only."""

from __future__ import annotations

import pytest

from airlock.policy import ClusterService, PolicyError, compile_plan, decide, precheck
from airlock.policy.decision import lookup_name
from airlock.policy.plan import EgressPlan
from layer0 import EnvironmentSpec, NetworkAction, NetworkPolicy, NetworkRule

SEARCH = ClusterService(name="search", namespace="tools", pods={"app.kubernetes.io/name": "Search"})
FULL = "search.tools.svc.cluster.local"
CLUSTER_IP = "10.96.12.7"


def plan_of(*rules: NetworkRule, namespace: str | None = None, domain: str = "cluster.local") -> EgressPlan:
    spec = EnvironmentSpec(network=NetworkPolicy(default=NetworkAction.DENY, rules=list(rules)))
    egress = compile_plan(spec).egress
    return egress.model_copy(update={"cluster_domain": domain, "cluster_namespace": namespace})


def allow(destination: str, port: int | None = None) -> NetworkRule:
    return NetworkRule(destination=destination, port=port, action=NetworkAction.ALLOW)


SERVICE_PLAN = plan_of(allow(SEARCH.destination(), 8080), namespace="sandboxes")


def test_the_destination_text_round_trips_with_label_case_kept() -> None:
    text = SEARCH.destination()
    assert text == "k8s-service:tools/search?pod.app.kubernetes.io%2Fname=Search"
    assert ClusterService.parse(text) == SEARCH
    [rule] = SERVICE_PLAN.rules
    assert (rule.kind, rule.service, rule.port) == ("service", SEARCH, 8080)


@pytest.mark.parametrize("name", [FULL, f"{FULL}.", "search.tools.svc", "search.tools", "SEARCH.Tools"])
def test_the_service_is_allowed_by_each_of_its_names_with_its_private_address(name: str) -> None:
    assert precheck(SERVICE_PLAN, name, 8080) is None  # to be resolved
    assert lookup_name(SERVICE_PLAN, name) == f"{FULL}."  # always the full name, absolute
    d = decide(SERVICE_PLAN, name, 8080, [CLUSTER_IP])
    assert d.allowed and d.ips == (CLUSTER_IP,), d.reason
    assert SERVICE_PLAN.allows_name(name, 8080)


@pytest.mark.parametrize(
    "name",
    [
        "other.tools.svc.cluster.local",  # another Service of the namespace
        "search.other.svc.cluster.local",  # the same name in another namespace
        "search.tools.svc.example.com",  # another domain: public DNS could answer anything
        "search.tools.svc.cluster.local.example.com",
        "x.search.tools.svc.cluster.local",
        "search",  # the bare name means the sandbox's namespace, which is not "tools"
        "kubernetes.default.svc.cluster.local",
    ],
)
def test_another_private_name_is_refused_before_resolution(name: str) -> None:
    early = precheck(SERVICE_PLAN, name, 8080)
    assert early is not None and not early.allowed
    assert not decide(SERVICE_PLAN, name, 8080, [CLUSTER_IP]).allowed
    assert lookup_name(SERVICE_PLAN, name) == name


def test_the_service_is_refused_on_another_port() -> None:
    assert precheck(SERVICE_PLAN, FULL, 8081) is not None
    assert not decide(SERVICE_PLAN, FULL, 8081, [CLUSTER_IP]).allowed


@pytest.mark.parametrize("address", [CLUSTER_IP, "10.0.0.1", "192.168.1.1"])
def test_a_private_address_is_never_allowed_by_itself(address: str) -> None:
    d = decide(SERVICE_PLAN, address, 8080, [])
    assert not d.allowed and d.rule.startswith("deny special"), d.reason


@pytest.mark.parametrize("address", ["169.254.169.254", "127.0.0.1", "::1", "fe80::1", "0.0.0.0"])
def test_the_service_name_never_grants_loopback_or_link_local(address: str) -> None:
    d = decide(SERVICE_PLAN, FULL, 8080, [address])
    assert not d.allowed and d.rule.startswith("deny special"), d.reason


def test_one_bad_answer_among_cluster_addresses_denies() -> None:
    assert not decide(SERVICE_PLAN, FULL, 8080, [CLUSTER_IP, "169.254.169.254"]).allowed
    assert decide(SERVICE_PLAN, FULL, 8080, [CLUSTER_IP, "fd00:10:96::7", "100.64.3.4"]).allowed


def test_a_domain_rule_for_the_same_name_still_grants_no_private_address() -> None:
    p = plan_of(allow(FULL, 8080))
    d = decide(p, FULL, 8080, [CLUSTER_IP])
    assert not d.allowed and "cannot grant" in d.reason


def test_the_bare_name_is_allowed_in_the_sandboxs_own_namespace_only() -> None:
    local = plan_of(allow(SEARCH.destination(), 8080), namespace="tools")
    assert lookup_name(local, "search") == f"{FULL}."
    assert decide(local, "search", 8080, [CLUSTER_IP]).allowed
    assert precheck(SERVICE_PLAN, "search", 8080) is not None


def test_the_cluster_domain_is_the_plans() -> None:
    corp = plan_of(allow(SEARCH.destination(), 8080), domain="corp.internal")
    assert decide(corp, "search.tools.svc.corp.internal", 8080, [CLUSTER_IP]).allowed
    assert precheck(corp, FULL, 8080) is not None  # cluster.local is not this cluster's domain
    assert lookup_name(corp, "search.tools") == "search.tools.svc.corp.internal."


@pytest.mark.parametrize("denied", ["*.svc.cluster.local", "search.tools", "*.tools"])
def test_a_deny_rule_for_any_form_of_the_name_wins(denied: str) -> None:
    p = plan_of(allow(SEARCH.destination(), 8080), NetworkRule(destination=denied, action=NetworkAction.DENY))
    for name in ("search.tools", FULL):
        early = precheck(p, name, 8080)
        assert early is not None and not early.allowed and "deny" in early.rule
    assert not decide(p, "search.tools", 8080, [CLUSTER_IP]).allowed
    assert not p.allows_name("search.tools.svc", 8080)


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        (allow(SEARCH.destination()), "needs a port"),
        (NetworkRule(destination=SEARCH.destination(), port=80, action=NetworkAction.DENY), "deny rule"),
        (allow("k8s-service:Tools/search", 80), "namespace 'Tools'"),
        (allow("k8s-service:tools/search?pod.bad key=x", 80), "label key"),
        (allow("k8s-service:tools", 80), "NAMESPACE/NAME"),
    ],
)
def test_invalid_service_rules_are_refused(rule: NetworkRule, problem: str) -> None:
    with pytest.raises(PolicyError) as e:
        plan_of(rule)
    assert problem in str(e.value)


def test_the_plan_shows_the_service_by_name() -> None:
    rows = compile_plan(
        EnvironmentSpec(
            network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow(SEARCH.destination(), 80)])
        )
    ).egress_rows()
    assert rows[0]["destination"] == "service search.tools (app.kubernetes.io/name=Search)"
    assert "Service" in rows[0]["matches"]

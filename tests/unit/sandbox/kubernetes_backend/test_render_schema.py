"""Every rendered object is valid against the official Kubernetes schemas, strictly (no unknown
field), for the oldest supported version (1.25) and the newest the validator bundles; and for
generated specs the proxy's NetworkPolicy neither refuses what the plan allows nor opens a
special range (private, loopback, link-local/metadata, ...) no CIDR rule inside it names.

Specs come from hypothesis: network rules of every kind (names, wildcards, ``*``, CIDRs of
both families incl. ``/0`` and special ranges, ports, denies), credentials of all three
kinds, resources, isolation and settings; those ``compile_plan`` refuses are skipped.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
import kubernetes_validate
import kubernetes_validate.utils as kubernetes_validate_utils
import pytest
from hypothesis import HealthCheck, assume, given, settings

from airlock.errors import ConfigError
from airlock.policy import SandboxPlan, decide
from airlock.policy.decision import SPECIAL_RANGES, IPAddress, net_within
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.sandbox.kubernetes._render import (
    SandboxShape,
    needs_proxy,
    render_default_deny,
    render_network_policies,
    render_pod,
    render_proxy_pod,
    render_proxy_secret,
    render_secret,
)
from layer0 import (
    ContainerIsolation,
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    GvisorIsolation,
    IsolationBoundary,
    MicroVmIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkPolicyIsolation,
    NetworkRule,
    ResourceLimits,
)
from tests.unit.sandbox.kubernetes_backend.test_render import (
    CASES,
    CERTIFICATE,
    PROXY_IP,
    TOKEN,
    case_shape,
    credentials_for,
    render_all,
    shape_for,
)


def _newest_version() -> str:
    try:
        return str(kubernetes_validate.latest_version())
    except Exception:  # an older validator without latest_version()
        return "1.37"


VERSIONS = ("1.25", _newest_version())


@pytest.fixture(scope="module", autouse=True)
def _schemas_read_once() -> Iterator[None]:
    """The validator reads and parses its schema files (megabytes) on every call; within this
    module each is read once (validation itself is unchanged)."""
    original = kubernetes_validate_utils.schema_contents
    kubernetes_validate_utils.schema_contents = functools.cache(original)
    yield
    kubernetes_validate_utils.schema_contents = original


def validate(obj: dict[str, Any]) -> None:
    for version in VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


# --- strategies ------------------------------------------------------------------------------

NAMES = [
    "api.example.com",
    "example.org",
    "api.anthropic.com",
    "api.openai.com",
    "pypi.org",
    "files.pythonhosted.org",
]
WILDCARDS = ["*.example.com", "*.pypi.org", "*.anthropic.com", "*"]
CIDRS = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "169.254.169.254/32",
    "169.254.169.254",
    "192.168.0.0/16",
    "8.8.8.0/24",
    "8.8.8.8",
    "1.2.3.0/24",
    "0.0.0.0/0",
    "::/0",
    "2606:4700::/32",
    "2606:4700:10::/48",
    "fd00::/8",
    "fd00::1",
]
PORTS = [22, 80, 443, 5432, 8443]

rules_st = st.lists(
    st.builds(
        NetworkRule,
        destination=st.sampled_from(NAMES + WILDCARDS + CIDRS),
        port=st.none() | st.sampled_from(PORTS),
        action=st.sampled_from([NetworkAction.ALLOW, NetworkAction.DENY]),
    ),
    max_size=6,
)

network_st = st.none() | st.builds(
    NetworkPolicy, default=st.sampled_from([NetworkAction.ALLOW, NetworkAction.DENY]), rules=rules_st
)

isolation_st: st.SearchStrategy[list[IsolationBoundary]] = st.lists(
    st.one_of(
        st.just(ContainerIsolation()),
        st.just(GvisorIsolation()),
        st.just(MicroVmIsolation()),
        st.builds(NetworkPolicyIsolation, rules=rules_st),
    ),
    max_size=2,
)

credential_name_st = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True)
injection_st = st.one_of(
    st.sampled_from(["GITHUB_TOKEN", "DB_PASSWORD", "api_token", "X"]).map(CredentialInjection.env_var),
    st.sampled_from(["/home/agent/.netrc", "/workspace/.secrets/key", "/srv/cred", "/tmp/c"]).map(
        CredentialInjection.file
    ),
)
credential_st = st.one_of(
    st.builds(CredentialRef, name=credential_name_st, injection=injection_st),
    st.builds(
        CredentialRef,
        name=st.sampled_from(["anthropic-api-key", "openai-api-key"]),
        injection=st.just(CredentialInjection.sidecar()),
    ),
)

resources_st = st.none() | st.builds(
    ResourceLimits,
    cpu=st.none() | st.sampled_from(["100m", "0.5", "1", "2", "8"]),
    memory=st.none() | st.sampled_from(["64Mi", "512Mi", "4Gi", "1G"]),
    disk=st.none() | st.sampled_from(["100Mi", "1Gi", "20G"]),
    gpu=st.none() | st.sampled_from(["1", "2", "all"]),
)

settings_st = st.builds(
    KubernetesSettings,
    workspace_medium=st.sampled_from(["Memory", "Disk"]),
    node_selector=st.sampled_from([{}, {"airlock.dev/pool": "sandboxes"}]),
    image_pull_secrets=st.sampled_from([(), ("registry-pull",)]),
    image_pull_policy=st.sampled_from(["IfNotPresent", "Always", "Never"]),
)


@st.composite
def specs(draw: st.DrawFn) -> EnvironmentSpec:
    credentials = draw(st.lists(credential_st, max_size=4, unique_by=lambda c: c.name))
    net = draw(network_st)
    sidecar_hosts = [f"api.{c.name.split('-')[0]}.com" for c in credentials if c.injection.kind == "sidecar"]
    if sidecar_hosts:  # the plan compiler requires a sidecar's upstream to be allowed
        extra = [
            NetworkRule(destination=host, port=draw(st.sampled_from([None, 443])), action=NetworkAction.ALLOW)
            for host in sidecar_hosts
        ]
        rules = (net.rules if net is not None else []) + extra
        net = NetworkPolicy(default=net.default if net is not None else NetworkAction.DENY, rules=rules)
    return EnvironmentSpec(
        isolation=draw(isolation_st), credentials=credentials, resources=draw(resources_st), network=net
    )


def shape_or_skip(spec: EnvironmentSpec, chosen: KubernetesSettings, deadline: int | None) -> SandboxShape:
    try:
        return shape_for(spec, chosen, active_deadline_s=deadline, sandbox_id="sb-" + "5a" * 8)
    except (ConfigError, EnvError):  # refused by the plan compiler or the isolation check
        assume(False)
        raise


# --- what the proxy's policy admits ----------------------------------------------------------


def sample_addresses(plan: SandboxPlan) -> list[IPAddress]:
    """Addresses around every rule's network and every special range, plus public ones."""
    out: list[IPAddress] = [ipaddress.ip_address(a) for a in ("93.184.216.34", "1.2.3.4", "2606:4700::1111")]
    networks = [r.network for r in plan.egress.rules if r.network is not None]
    networks += [net for _, net in SPECIAL_RANGES if net.prefixlen > 0]
    for net in networks:
        out += [net.network_address, net.broadcast_address, net[net.num_addresses // 2]]
    out.append(ipaddress.ip_address("169.254.169.254"))
    return [a for a in dict.fromkeys(out) if not (a.version == 6 and a.ipv4_mapped is not None)]


Block = tuple[
    ipaddress.IPv4Network | ipaddress.IPv6Network, list[ipaddress.IPv4Network | ipaddress.IPv6Network]
]


def ip_blocks(policy: dict[str, Any]) -> list[tuple[list[int], list[Block]]]:
    """The policy's egress rules as (ports, ipBlocks) with parsed networks ([] ports: any)."""
    out = []
    for egress in policy["spec"]["egress"]:
        blocks = [
            (
                ipaddress.ip_network(p["ipBlock"]["cidr"]),
                [ipaddress.ip_network(e) for e in p["ipBlock"].get("except", [])],
            )
            for p in egress["to"]
            if "ipBlock" in p
        ]
        out.append(([p["port"] for p in egress.get("ports", [])], blocks))
    return out


def admitted(blocks: list[tuple[list[int], list[Block]]], address: IPAddress, port: int) -> bool:
    return any(
        (not ports or port in ports)
        and any(
            address.version == cidr.version and address in cidr and not any(address in e for e in excepts)
            for cidr, excepts in rule_blocks
        )
        for ports, rule_blocks in blocks
    )


def check_egress_policy(plan: SandboxPlan, policy: dict[str, Any]) -> None:
    """The proxy pod's policy admits everything the plan allows, and no special address unless
    a CIDR allow rule inside that special range names it."""
    blocks = ip_blocks(policy)
    ports = sorted({*PORTS, *(r.port for r in plan.egress.rules if r.port is not None)})
    names = [r.destination for r in plan.egress.rules if r.kind == "domain"] + ["other.example.net"]
    names += ["x" + r.destination[1:] for r in plan.egress.rules if r.kind == "suffix"]
    for address in sample_addresses(plan):
        ip = str(address)
        special = [net for _, net in SPECIAL_RANGES if net.version == address.version and address in net]
        for port in ports:
            is_admitted = admitted(blocks, address, port)
            allowed = decide(plan.egress, ip, port, []).allowed or any(
                decide(plan.egress, name, port, [ip]).allowed for name in names
            )
            if allowed:
                assert is_admitted, f"the NetworkPolicy refuses {ip}:{port}, which the plan allows"
            if is_admitted and special:
                granted = [
                    r
                    for r in plan.egress.rules
                    if r.action == "allow"
                    and r.network is not None
                    and r.port in (None, port)
                    and address in r.network
                    and any(net_within(r.network, s) for s in special)
                ]
                assert granted, f"the NetworkPolicy admits the special address {ip}:{port}"


# --- tests ----------------------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(
    spec=specs(),
    chosen=settings_st,
    deadline=st.none() | st.integers(min_value=1, max_value=86_400),
)
def test_generated_objects_are_valid_and_the_egress_policy_is_exact(
    spec: EnvironmentSpec, chosen: KubernetesSettings, deadline: int | None
) -> None:
    shape = shape_or_skip(spec, chosen, deadline)
    credentials = credentials_for(shape.plan)
    objects = [render_default_deny(shape.namespace), *render_network_policies(shape)]
    objects.append(render_secret(shape, TOKEN, credentials, CERTIFICATE))
    proxy_ip = None
    if needs_proxy(shape.plan):
        objects += [render_proxy_secret(shape, credentials), render_proxy_pod(shape)]
        proxy_ip = PROXY_IP
        check_egress_policy(shape.plan, objects[2])
    else:
        assert objects[1]["spec"]["egress"] == []
    if shape.limits.gpus == -1:
        with pytest.raises(EnvError):
            render_pod(shape, proxy_ip=proxy_ip)
    else:
        objects.append(render_pod(shape, proxy_ip=proxy_ip))
    for obj in objects:
        validate(obj)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_objects_are_valid(name: str) -> None:
    for obj in render_all(case_shape(name)):
        validate(obj)


def test_the_validation_is_strict() -> None:
    pod = render_all(case_shape("deny_all"))[-1]
    assert pod["kind"] == "Pod"
    misspelt = copy.deepcopy(pod)
    misspelt["spec"]["containers"][0]["securityContex"] = {"privileged": False}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(misspelt)
    wrong_type = copy.deepcopy(pod)
    wrong_type["spec"]["securityContext"]["runAsUser"] = "65534"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(wrong_type)

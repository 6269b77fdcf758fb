"""The pure egress decision: no traffic is sent; addresses are only compared."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airlock.policy.decision import SPECIAL_RANGES, decide, parse_ip, special_range
from airlock.policy.plan import EgressPlan, EgressRule, compile_plan
from layer0 import EnvironmentSpec


def plan(*rules: tuple[str, int | None, str], default: str = "deny") -> EgressPlan:
    spec = EnvironmentSpec.model_validate(
        {
            "network": {
                "default": default,
                "rules": [{"destination": d, "port": p, "action": a} for d, p, a in rules],
            }
        }
    )
    return compile_plan(spec).egress


PUBLIC = "93.184.216.34"


def test_default_deny_denies_everything() -> None:
    d = decide(EgressPlan(), "example.com", 443, [PUBLIC])
    assert not d.allowed
    assert d.rule == "default deny"
    assert "no name rule allows" in d.reason


def test_exact_domain_allows_only_that_name() -> None:
    p = plan(("api.example.com", None, "allow"))
    assert decide(p, "api.example.com", 443, [PUBLIC]).allowed
    assert decide(p, "API.Example.COM.", 443, [PUBLIC]).allowed
    assert not decide(p, "www.example.com", 443, [PUBLIC]).allowed
    assert not decide(p, "example.com", 443, [PUBLIC]).allowed
    assert not decide(p, "api.example.com.evil.net", 443, [PUBLIC]).allowed


def test_suffix_matches_names_strictly_below() -> None:
    p = plan(("*.example.com", None, "allow"))
    assert decide(p, "a.example.com", 80, [PUBLIC]).allowed
    assert decide(p, "a.b.example.com", 80, [PUBLIC]).allowed
    assert not decide(p, "example.com", 80, [PUBLIC]).allowed
    assert not decide(p, "badexample.com", 80, [PUBLIC]).allowed


def test_port_rule_is_honoured() -> None:
    p = plan(("api.example.com", 443, "allow"))
    assert decide(p, "api.example.com", 443, [PUBLIC]).allowed
    d = decide(p, "api.example.com", 80, [PUBLIC])
    assert not d.allowed and d.rule == "default deny"


def test_cidr_rule_admits_ip_literals_never_names() -> None:
    p = plan(("93.184.216.0/24", 443, "allow"))
    assert decide(p, PUBLIC, 443, []).allowed
    d = decide(p, "anything.test", 443, [PUBLIC])  # even when it resolves into the CIDR
    assert not d.allowed and "no name rule allows it" in d.reason
    both = plan(("93.184.216.0/24", 443, "allow"), ("*.example.com", 443, "allow"))
    assert decide(both, "a.example.com", 443, [PUBLIC]).allowed
    assert decide(both, "a.example.com", 443, ["93.184.217.1"]).allowed  # by the name rule


def test_deny_wins_regardless_of_order() -> None:
    for rules in (
        [("*.example.com", None, "allow"), ("bad.example.com", None, "deny")],
        [("bad.example.com", None, "deny"), ("*.example.com", None, "allow")],
    ):
        p = plan(*rules)
        d = decide(p, "bad.example.com", 443, [PUBLIC])
        assert not d.allowed
        assert d.rule.startswith("deny bad.example.com")
        assert decide(p, "good.example.com", 443, [PUBLIC]).allowed


def test_deny_cidr_applies_to_names_resolving_into_it() -> None:
    p = plan(("*.example.com", None, "allow"), ("93.184.216.0/24", None, "deny"))
    assert not decide(p, "a.example.com", 443, [PUBLIC]).allowed
    assert decide(p, "a.example.com", 443, ["1.1.1.1"]).allowed


@pytest.mark.parametrize(
    "ip",
    [
        "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "127.0.0.1", "169.254.169.254",
        "169.254.1.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fd00::1",
        "fe80::1", "ff02::1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
    ],
)  # fmt: skip
def test_special_addresses_are_not_granted_by_names_wildcards_or_default(ip: str) -> None:
    p = plan(("*", None, "allow"), ("metadata.test", None, "allow"), default="allow")
    d = decide(p, "metadata.test", 80, [ip])
    assert not d.allowed
    assert d.rule.startswith("deny special")
    assert "only a CIDR rule inside that range" in d.reason
    assert not decide(p, ip, 80, []).allowed  # IP literal too


def test_explicit_cidr_grants_special_address() -> None:
    p = plan(
        ("169.254.169.254/32", 80, "allow"), ("10.0.0.0/8", None, "allow"), ("internal.test", None, "allow")
    )
    assert decide(p, "169.254.169.254", 80, []).allowed
    assert not decide(p, "169.254.169.254", 81, []).allowed
    assert not decide(p, "169.254.169.253", 80, []).allowed
    assert decide(p, "internal.test", 5432, ["10.1.2.3"]).allowed
    assert not decide(p, "internal.test", 5432, ["192.168.1.1"]).allowed
    assert decide(p, "::ffff:10.9.9.9", 22, []).allowed  # mapped address checked as IPv4


def test_slash_zero_means_public_only() -> None:
    p = plan(("0.0.0.0/0", None, "allow"), ("::/0", None, "allow"), ("*", None, "allow"))
    assert decide(p, "x.test", 443, [PUBLIC]).allowed
    assert decide(p, "x.test", 443, ["2606:4700::1111"]).allowed
    assert not decide(p, "x.test", 443, ["10.0.0.1"]).allowed
    assert not decide(p, "169.254.169.254", 80, []).allowed


def test_rebinding_one_bad_answer_denies_the_name() -> None:
    p = plan(("api.example.com", None, "allow"))
    d = decide(p, "api.example.com", 443, [PUBLIC, "127.0.0.1"])
    assert not d.allowed
    assert "127.0.0.1" in d.reason
    ok = decide(p, "api.example.com", 443, [PUBLIC, "1.1.1.1", PUBLIC])
    assert ok.allowed and ok.ips == (PUBLIC, "1.1.1.1")


def test_ip_literal_ignores_resolved_list_and_domain_rules() -> None:
    p = plan(("*", None, "allow"))
    d = decide(p, PUBLIC, 443, ["1.1.1.1"])
    assert not d.allowed  # '*' matches names only
    p2 = plan((PUBLIC, None, "allow"))
    d2 = decide(p2, PUBLIC, 443, ["10.0.0.1"])
    assert d2.allowed and d2.ips == (PUBLIC,)
    p6 = plan(("2606:4700::/32", None, "allow"))
    assert decide(p6, "[2606:4700::1111]", 443, []).allowed


def test_invalid_requests() -> None:
    p = plan(("*", None, "allow"))
    assert not decide(p, "x.test", 0, [PUBLIC]).allowed
    assert not decide(p, "x.test", 70000, [PUBLIC]).allowed
    assert decide(p, "x.test", 443, []).rule == "no address"
    assert not decide(p, "", 443, [PUBLIC]).allowed
    assert not decide(p, "x.test", 443, ["not-an-ip"]).allowed


def test_parse_ip_and_special_range() -> None:
    assert parse_ip("[::1]") == ipaddress.ip_address("::1")
    assert parse_ip("::ffff:1.2.3.4") == ipaddress.ip_address("1.2.3.4")
    assert parse_ip("example.com") is None
    assert special_range(ipaddress.ip_address(PUBLIC)) is None
    found = special_range(ipaddress.ip_address("169.254.169.254"))
    assert found is not None and "metadata" in found[0]


# --- properties ------------------------------------------------------------------------

ipv4 = st.integers(min_value=0, max_value=2**32 - 1).map(ipaddress.IPv4Address)
ipv6 = st.integers(min_value=0, max_value=2**128 - 1).map(ipaddress.IPv6Address)
any_ip = st.one_of(ipv4, ipv6)
label = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
name = st.lists(label, min_size=2, max_size=4).map(".".join)
port = st.integers(min_value=1, max_value=65535)


@given(ip=any_ip, host=name, p=port)
def test_property_special_ip_never_reached_through_a_name(
    ip: ipaddress._BaseAddress, host: str, p: int
) -> None:
    egress = plan(("*", None, "allow"), (host, None, "allow"), ("0.0.0.0/0", None, "allow"), default="allow")
    d = decide(egress, host, p, [ip])  # type: ignore[list-item]
    assert d.allowed == (special_range(ip) is None)  # type: ignore[arg-type]


@given(data=st.data(), p=port)
def test_property_special_ip_granted_only_by_cidr_inside_its_range(data: st.DataObject, p: int) -> None:
    label_, net = data.draw(st.sampled_from(SPECIAL_RANGES))
    offset = data.draw(st.integers(min_value=0, max_value=net.num_addresses - 1))
    ip = net.network_address + offset
    if special_range(ip) != (label_, net):  # an earlier, overlapping entry claims it
        return
    inside = EgressPlan(rules=(EgressRule(destination=str(net), kind="cidr", action="allow"),))
    assert decide(inside, str(ip), p, []).allowed
    host_rule = EgressRule(destination=f"{ip}/{ip.max_prefixlen}", kind="cidr", action="allow")
    assert decide(EgressPlan(rules=(host_rule,)), str(ip), p, []).allowed
    assert not decide(EgressPlan(default="allow"), str(ip), p, []).allowed


@given(
    rules=st.lists(
        st.tuples(
            st.sampled_from(
                ["a.example.com", "*.example.com", "93.184.216.0/24", "10.0.0.0/8", "*", "b.test"]
            ),
            st.one_of(st.none(), st.sampled_from([80, 443])),
            st.sampled_from(["allow", "deny"]),
        ),
        max_size=6,
    ),
    host=st.sampled_from(["a.example.com", "x.example.com", "b.test", "c.test"]),
    ip=st.sampled_from([PUBLIC, "10.1.1.1", "1.1.1.1", "127.0.0.1"]),
    p=st.sampled_from([80, 443, 8080]),
    seed=st.randoms(),
)
def test_property_order_never_matters_and_deny_wins(
    rules: list[tuple[str, int | None, str]], host: str, ip: str, p: int, seed: object
) -> None:
    built = [EgressRule(destination=d, kind=_kind(d), port=pt, action=a) for d, pt, a in rules]  # type: ignore[arg-type]
    shuffled = list(built)
    seed.shuffle(shuffled)  # type: ignore[attr-defined]
    one = decide(EgressPlan(rules=tuple(built)), host, p, [ip])
    two = decide(EgressPlan(rules=tuple(shuffled)), host, p, [ip])
    assert one.allowed == two.allowed
    addr = ipaddress.ip_address(ip)
    if any(r.action == "deny" and r.matches(host, p, addr) for r in built):
        assert not one.allowed


def _kind(dest: str) -> str:
    if dest == "*":
        return "any_domain"
    if dest.startswith("*."):
        return "suffix"
    return "cidr" if dest[0].isdigit() else "domain"


def test_precheck_denies_without_resolving_only_when_no_rule_could_allow() -> None:
    from airlock.policy.decision import precheck

    p = plan(("api.example.com", 443, "allow"), ("bad.example.com", None, "deny"))
    d = precheck(p, "other.test", 443)
    assert d is not None and not d.allowed and "not resolved" in d.reason
    assert precheck(p, "api.example.com", 443) is None  # must resolve, then decide
    assert precheck(p, "api.example.com", 80) is not None
    bad = precheck(p, "bad.example.com", 443)
    assert bad is not None and bad.rule.startswith("deny bad.example.com")
    lit = precheck(p, "10.0.0.1", 443)
    assert lit is not None and not lit.allowed
    assert precheck(plan(default="allow"), "anything.test", 1) is None


@pytest.mark.parametrize("port", [443, 11434])
def test_precheck_never_resolves_a_name_because_a_cidr_rule_matches_its_port(port: int) -> None:
    """DNS exfiltration: a CIDR rule with a matching port (the demo's model endpoint rule)
    must not make the proxy resolve ``<data>.attacker.test``."""
    from airlock.policy.decision import precheck

    for rules in ([("172.17.0.1/32", port, "allow")], [("10.0.0.0/8", None, "allow")]):
        d = precheck(plan(*rules), "c2VjcmV0.attacker.test", port)
        assert d is not None and not d.allowed
        assert (
            d.reason.endswith("(default deny; not resolved)")
            and "CIDR rule admits IP literals only" in d.reason
        )
        assert precheck(plan(*rules), "172.17.0.1", port) is not None  # literal: decided, no lookup

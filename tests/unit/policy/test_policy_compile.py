"""compile_plan: one inspectable plan, and config-time rejection of unsafe or contradictory specs."""

from __future__ import annotations

from typing import Any

import pytest

from airlock.errors import ConfigError
from airlock.policy.plan import (
    SIDECAR_CONVENTIONS,
    EgressPlan,
    PolicyError,
    SandboxPlan,
    SidecarRoute,
    compile_plan,
)
from layer0 import EnvironmentSpec

ANTHROPIC_ALLOW = {"destination": "api.anthropic.com", "port": 443, "action": "allow"}


def spec(
    rules: list[dict[str, Any]] | None = None,
    *,
    default: str = "deny",
    credentials: list[dict[str, Any]] | None = None,
    isolation: list[dict[str, Any]] | None = None,
) -> EnvironmentSpec:
    data: dict[str, Any] = {"credentials": credentials or [], "isolation": isolation or []}
    if rules is not None:
        data["network"] = {"default": default, "rules": rules}
    return EnvironmentSpec.model_validate(data)


def problems(s: EnvironmentSpec, **kw: Any) -> tuple[str, ...]:
    with pytest.raises(PolicyError) as info:
        compile_plan(s, **kw)
    assert isinstance(info.value, ConfigError)
    return info.value.problems


def test_no_network_means_deny_all_and_no_proxy() -> None:
    plan = compile_plan(EnvironmentSpec())
    assert plan.egress == EgressPlan(default="deny", rules=())
    assert not plan.needs_egress_proxy
    assert plan.credentials == ()
    assert "default deny" in plan.render_text()
    assert "credentials: none" in plan.render_text()


def test_rules_from_network_and_isolation_are_merged_and_normalised() -> None:
    plan = compile_plan(
        spec(
            [{"destination": "API.Example.com.", "port": 443, "action": "allow"}],
            isolation=[
                {"type": "container"},
                {"type": "network_policy", "rules": [{"destination": "10.1.2.3", "action": "allow"}]},
                {"type": "network_policy", "rules": [{"destination": "[fd00::]/8", "action": "allow"}]},
                {
                    "type": "network_policy",
                    "rules": [{"destination": "*.Docs.Example.com", "action": "allow"}],
                },
            ],
        )
    )
    got = [(r.destination, r.kind, r.port, r.source) for r in plan.egress.rules]
    assert got == [
        ("api.example.com", "domain", 443, "spec.network.rules[0]"),
        ("10.1.2.3/32", "cidr", None, "isolation[1].rules[0]"),
        ("fd00::/8", "cidr", None, "isolation[2].rules[0]"),
        ("*.docs.example.com", "suffix", None, "isolation[3].rules[0]"),
    ]
    assert plan.needs_egress_proxy
    rows = plan.egress_rows()
    assert rows[0] == {
        "#": "1",
        "action": "allow",
        "destination": "api.example.com",
        "port": "443",
        "matches": "exactly this name",
        "source": "spec.network.rules[0]",
    }
    assert rows[-1]["destination"] == "(default)" and rows[-1]["action"] == "deny"


def test_plan_round_trips_as_json_for_the_proxy_plan_file() -> None:
    plan = compile_plan(spec([ANTHROPIC_ALLOW, {"destination": "10.0.0.0/8", "action": "allow"}]))
    again = EgressPlan.model_validate_json(plan.egress.model_dump_json())
    assert again == plan.egress
    assert again.rules[1].network is not None
    with pytest.raises(ValueError, match="not a domain"):
        EgressPlan.model_validate(
            {"rules": [{"destination": "10.0.0.0/8", "kind": "domain", "action": "allow"}]}
        )
    with pytest.raises(ValueError, match="extra"):
        EgressPlan.model_validate({"rules": [], "defualt": "allow"})


@pytest.mark.parametrize(
    ("destination", "fragment"),
    [
        ("exa mple.com", "invalid domain"),
        ("-bad.com", "invalid domain"),
        ("a..com", "invalid domain"),
        ("foo*.com", "'*' is only allowed"),
        ("*.", "wildcard"),
        ("bücher.de", "punycode"),
        ("10.0.0.1/8", "did you mean 10.0.0.0/8"),
        ("10.0.0.0/33", "invalid IP/CIDR"),
        ("300.1.1.1", "invalid IP/CIDR"),
        ("example.com:443", "put the port in the rule's port field"),
        ("1.2.3", "invalid IP/CIDR"),
        ("x" * 64 + ".com", "invalid domain"),
    ],
)
def test_invalid_destinations_are_rejected(destination: str, fragment: str) -> None:
    (p,) = problems(spec([{"destination": destination, "action": "allow"}]))
    assert fragment in p
    assert p.startswith("spec.network.rules[0]")


def test_port_zero_is_rejected() -> None:
    (p,) = problems(spec([{"destination": "example.com", "port": 0, "action": "allow"}]))
    assert "port 0 is out of range" in p


@pytest.mark.parametrize("cidr", ["8.0.0.0/6", "172.0.0.0/8", "160.0.0.0/3", "fc00::/6", "fe00::/8"])
def test_cidr_straddling_a_special_range_is_rejected(cidr: str) -> None:
    (p,) = problems(spec([{"destination": cidr, "action": "allow"}]))
    assert "without being inside it" in p and "explicitly" in p


def test_cidr_inside_special_range_and_slash_zero_are_accepted() -> None:
    plan = compile_plan(
        spec(
            [
                {"destination": "10.0.0.0/8", "action": "allow"},
                {"destination": "169.254.169.254/32", "port": 80, "action": "allow"},
                {"destination": "0.0.0.0/0", "action": "allow"},
                {"destination": "100.0.0.0/6", "port": 25, "action": "deny"},  # deny may straddle a range
            ]
        )
    )
    assert [r.destination for r in plan.egress.rules][:3] == ["10.0.0.0/8", "169.254.169.254/32", "0.0.0.0/0"]
    assert "every public IPv4 address" in plan.render_text()


def test_contradictory_and_overridden_rules_are_rejected() -> None:
    got = problems(
        spec(
            [
                {"destination": "a.example.com", "port": 443, "action": "allow"},
                {"destination": "a.example.com", "port": 443, "action": "deny"},
                {"destination": "x.internal.test", "action": "allow"},
                {"destination": "*.internal.test", "action": "deny"},
                {"destination": "10.1.0.0/16", "action": "allow"},
                {"destination": "10.0.0.0/8", "action": "deny"},
            ]
        )
    )
    assert len(got) == 3
    assert "allow a.example.com:443 (spec.network.rules[0]) contradicts deny a.example.com:443" in got[0]
    assert "is entirely overridden by deny *.internal.test" in got[1]
    assert "allow 10.1.0.0/16" in got[2] and "deny 10.0.0.0/8" in got[2]


def test_partial_overlap_is_a_carve_out_not_a_contradiction() -> None:
    compile_plan(
        spec(
            [
                {"destination": "*.example.com", "action": "allow"},
                {"destination": "evil.example.com", "action": "deny"},
                {"destination": "api.example.com", "port": 443, "action": "allow"},
                {"destination": "api.example.com", "port": 80, "action": "deny"},
            ]
        )
    )


@pytest.mark.parametrize(
    ("rules", "default", "fragment"),
    [
        ([], "allow", "spec.network.default is allow"),
        ([{"destination": "*", "action": "allow"}], "deny", "allow * (spec.network.rules[0]) allows every"),
        ([{"destination": "0.0.0.0/0", "action": "allow"}], "deny", "allows every destination"),
        ([{"destination": "::/0", "port": 443, "action": "allow"}], "deny", "allows every destination"),
    ],
)
def test_allow_all_with_credentials_is_rejected(
    rules: list[dict[str, Any]], default: str, fragment: str
) -> None:
    creds = [{"name": "gh-token", "injection": {"env_var": {"var_name": "GH_TOKEN"}}}]
    got = problems(spec(rules, default=default, credentials=creds))
    assert any(fragment in p for p in got), got
    assert any("explicit allow-list" in p for p in got)
    compile_plan(spec(rules, default=default))  # the same network without credentials is fine


def test_credentials_env_file_sidecar_placements() -> None:
    plan = compile_plan(
        spec(
            [ANTHROPIC_ALLOW],
            credentials=[
                {"name": "gh-token", "injection": {"env_var": {"var_name": "GH_TOKEN"}}},
                {"name": "pypi-token", "injection": {"file": {"path": "/run/secrets//pypi"}}},
                {"name": "anthropic-api-key", "injection": "sidecar"},
            ],
        )
    )
    env, file, side = plan.credentials
    assert (env.kind, env.var_name, env.enters_sandbox) == ("env_var", "GH_TOKEN", True)
    assert (file.kind, file.path) == ("file", "/run/secrets/pypi")
    assert side.kind == "sidecar" and not side.enters_sandbox
    assert side.route == SIDECAR_CONVENTIONS["anthropic-api-key"]
    assert side.route is not None and (side.route.host, side.route.port, side.route.header) == (
        "api.anthropic.com",
        443,
        "x-api-key",
    )
    assert plan.sidecars == (side,)
    rows = {r["name"]: r for r in plan.credential_rows()}
    assert rows["anthropic-api-key"]["in sandbox"] == "no"
    assert "header x-api-key" in rows["anthropic-api-key"]["target"]
    assert rows["gh-token"]["target"] == "env $GH_TOKEN inside the sandbox"
    text = plan.render_text()
    assert "anthropic-api-key" in text and "/run/secrets/pypi" in text


def test_sidecar_needs_route_and_allowed_destination() -> None:
    got = problems(spec([], credentials=[{"name": "my-key", "injection": "sidecar"}]))
    assert "needs a route" in got[0] and "anthropic-api-key" in got[0]
    got = problems(spec([], credentials=[{"name": "anthropic-api-key", "injection": "sidecar"}]))
    assert "api.anthropic.com:443, which no allow rule permits" in got[0]
    # A wildcard name rule counts; a port mismatch does not; a deny carve-out wins.
    ok = compile_plan(
        spec([{"destination": "*.anthropic.com", "action": "allow"}],
             credentials=[{"name": "anthropic-api-key", "injection": "sidecar"}])
    )  # fmt: skip
    assert ok.sidecars
    got = problems(
        spec([{"destination": "api.anthropic.com", "port": 80, "action": "allow"}],
             credentials=[{"name": "anthropic-api-key", "injection": "sidecar"}])
    )  # fmt: skip
    assert "no allow rule permits" in got[0]
    got = problems(
        spec([{"destination": "*.anthropic.com", "action": "allow"},
              {"destination": "api.anthropic.com", "action": "deny"}],
             credentials=[{"name": "anthropic-api-key", "injection": "sidecar"}])
    )  # fmt: skip
    assert any("no allow rule permits" in p for p in got)


def test_configured_sidecar_route_overrides_convention_and_ip_upstream_needs_cidr() -> None:
    route = SidecarRoute(upstream="http://127.0.0.1:9999/", header="Authorization", value_prefix="Bearer ")
    assert route.upstream == "http://127.0.0.1:9999" and route.header == "authorization"
    creds = [{"name": "anthropic-api-key", "injection": "sidecar"}]
    got = problems(spec([{"destination": "localhost", "action": "allow"}], credentials=creds),
                   sidecar_routes={"anthropic-api-key": route})  # fmt: skip
    assert "127.0.0.1:9999" in got[0]
    plan = compile_plan(
        spec([{"destination": "127.0.0.1", "port": 9999, "action": "allow"}], credentials=creds),
        sidecar_routes={"anthropic-api-key": route},
    )
    assert plan.sidecars[0].route == route
    assert route.stripped_headers == ("authorization", "x-api-key", "api-key", "proxy-authorization")


@pytest.mark.parametrize(
    "upstream", ["ftp://x", "https://", "https://u:p@host", "https://host/?q=1", "https://host:99999"]
)
def test_invalid_sidecar_routes(upstream: str) -> None:
    with pytest.raises(ValueError, match="upstream"):
        SidecarRoute(upstream=upstream, header="x-api-key")
    with pytest.raises(ValueError, match="invalid header"):
        SidecarRoute(upstream="https://h", header="bad header")


@pytest.mark.parametrize(
    ("cred", "fragment"),
    [
        ({"name": "bad/name", "injection": "sidecar"}, "credential name"),
        ({"name": "k", "injection": {"env_var": {"var_name": "1X"}}}, "not a valid identifier"),
        ({"name": "k", "injection": {"env_var": {"var_name": "HTTPS_PROXY"}}}, "reserved"),
        ({"name": "k", "injection": {"env_var": {"var_name": "https_proxy"}}}, "reserved"),
        ({"name": "k", "injection": {"env_var": {"var_name": "LD_PRELOAD"}}}, "reserved"),
        ({"name": "k", "injection": {"env_var": {"var_name": "AIRLOCK_TOKEN"}}}, "reserved"),
        ({"name": "k", "injection": {"file": {"path": "relative/x"}}}, "must be absolute"),
        ({"name": "k", "injection": {"file": {"path": "/run/../etc/x"}}}, "without '..'"),
        ({"name": "k", "injection": {"file": {"path": "/etc/shadow"}}}, "system directory"),
        ({"name": "k", "injection": {"file": {"path": "/run/airlock/runner.sock"}}}, "system directory"),
    ],
)
def test_invalid_credentials(cred: dict[str, Any], fragment: str) -> None:
    (p,) = problems(spec([], credentials=[cred]))
    assert fragment in p


def test_duplicate_credentials_and_targets() -> None:
    got = problems(
        spec(
            [],
            credentials=[
                {"name": "a", "injection": {"env_var": {"var_name": "TOKEN"}}},
                {"name": "a", "injection": {"file": {"path": "/secrets/a"}}},
                {"name": "b", "injection": {"env_var": {"var_name": "TOKEN"}}},
                {"name": "c", "injection": {"file": {"path": "/secrets/c"}}},
                {"name": "d", "injection": {"file": {"path": "/secrets//c"}}},
            ],
        )
    )
    assert len(got) == 3
    assert "already injected by spec.credentials[0]" in got[0]
    assert "TOKEN is already used" in got[1]
    assert "/secrets/c is already used" in got[2]


def test_all_problems_reported_together() -> None:
    got = problems(
        spec(
            [
                {"destination": "bad host", "action": "allow"},
                {"destination": "10.0.0.1/8", "action": "allow"},
            ],
            default="allow",
            credentials=[{"name": "k", "injection": {"env_var": {"var_name": "PATH"}}}],
        )
    )
    assert len(got) == 4
    msg = str(PolicyError(got))
    assert msg.count("\n  - ") == 4


def test_sandbox_plan_is_frozen_and_forbids_extra() -> None:
    plan = compile_plan(EnvironmentSpec())
    with pytest.raises(ValueError):
        plan.egress = EgressPlan(default="allow")  # type: ignore[misc]
    with pytest.raises(ValueError):
        SandboxPlan.model_validate({"egress": {}, "secrets": []})

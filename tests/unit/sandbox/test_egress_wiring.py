"""The Docker rendering of a SandboxPlan, without Docker: sandbox settings, proxy config, provider rewrite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airlock.policy import ResolvedCredentials, resolve_credentials
from airlock.policy.plan import SidecarRoute, compile_plan
from airlock.policy.secrets import EnvSecretResolver
from airlock.proxy._clients import ClientFilter
from airlock.proxy.bundle import BundleConfig
from airlock.sandbox import sidecar_agent
from airlock.sandbox.docker._egress import (
    CREDENTIAL_PORT_BASE,
    PROXY_ALIAS,
    EgressWiring,
    proxy_urls,
)
from airlock.spec import AgentSpec, ProviderSpec
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
)

ANTHROPIC = CredentialRef(name="anthropic-api-key", injection=CredentialInjection.sidecar())
MODEL_API = NetworkRule(destination="api.anthropic.com", port=443, action=NetworkAction.ALLOW)


def spec(*creds: CredentialRef, rules: tuple[NetworkRule, ...] = (MODEL_API,)) -> EnvironmentSpec:
    return EnvironmentSpec(
        network=NetworkPolicy(default=NetworkAction.DENY, rules=list(rules)), credentials=list(creds)
    )


def agent(kind: str, base_url: str | None = None, **kw: Any) -> AgentSpec:
    model = "m" if kind != "scripted" else None
    script = [] if kind == "scripted" else None
    return AgentSpec(
        name="a", provider=ProviderSpec(kind=kind, model=model, base_url=base_url, script=script, **kw)
    )


class _Net:
    name = "airlock-sb-0123456789ab"


def wiring(
    plan_spec: EnvironmentSpec, values: dict[str, str], tmp_path: Path, **routes: SidecarRoute
) -> EgressWiring:
    plan = compile_plan(plan_spec, sidecar_routes=routes)
    w = EgressWiring(
        client=None,
        sandbox_id="sb-0123456789ab",
        state_dir=tmp_path,
        labels={},
        user=(1000, 1000),
        root=False,
        image="img",
        plan=plan,
        credentials=ResolvedCredentials(values),
        egress_networks=["airlock-egress"],
        events=None,
    )
    w.network = _Net()
    w.subnet = "172.30.0.0/16"
    return w


def test_sidecar_points_the_default_anthropic_url_at_the_credential_proxy() -> None:
    plan = compile_plan(spec(ANTHROPIC))
    rewritten = sidecar_agent(
        agent("anthropic", api_key_env="ANTHROPIC_API_KEY"), plan, proxy_urls({"anthropic-api-key": 8081})
    )
    assert rewritten.provider.base_url == f"http://{PROXY_ALIAS}:8081"
    assert rewritten.provider.api_key_env is None  # the proxy strips whatever key is sent


def test_sidecar_keeps_the_path_below_the_upstream() -> None:
    route = SidecarRoute(upstream="http://10.1.2.3:8765", header="authorization", value_prefix="Bearer ")
    s = spec(
        CredentialRef(name="local-key", injection=CredentialInjection.sidecar()),
        rules=(NetworkRule(destination="10.1.2.3/32", port=8765, action=NetworkAction.ALLOW),),
    )
    plan = compile_plan(s, sidecar_routes={"local-key": route})
    local = agent("openai_compat", "http://10.1.2.3:8765/v1")
    rewritten = sidecar_agent(local, plan, proxy_urls({"local-key": 8081}))
    assert rewritten.provider.base_url == f"http://{PROXY_ALIAS}:8081/v1"


def test_sidecar_leaves_other_providers_alone() -> None:
    plan = compile_plan(spec(ANTHROPIC))
    other = agent("openai_compat", "http://10.9.9.9:8000/v1")
    assert sidecar_agent(other, plan, proxy_urls({"anthropic-api-key": 8081})) == other
    # A prefix that is not a path boundary does not count.
    tricky = agent("anthropic", "https://api.anthropic.com.evil.test")
    assert sidecar_agent(tricky, plan, proxy_urls({"anthropic-api-key": 8081})) == tricky


def test_sidecar_points_an_http_mcp_server_below_its_upstream_at_the_credential_proxy() -> None:
    route = SidecarRoute(upstream="https://tools.example.test", header="authorization")
    s = spec(
        ANTHROPIC,
        CredentialRef(name="tools-key", injection=CredentialInjection.sidecar()),
        rules=(MODEL_API, NetworkRule(destination="tools.example.test", action=NetworkAction.ALLOW)),
    )
    plan = compile_plan(s, sidecar_routes={"tools-key": route})
    servers = [
        {"name": "tools", "transport": "http", "url": "https://tools.example.test/mcp/"},
        {"name": "other", "transport": "http", "url": "https://other.example.test/mcp"},
        {"name": "lookalike", "transport": "http", "url": "https://tools.example.test.evil.test/mcp"},
        {"name": "local", "transport": "stdio", "command": ["srv"]},
    ]
    original = AgentSpec.model_validate(
        {"name": "a", "provider": {"kind": "anthropic", "model": "m"}, "mcp_servers": servers}
    )
    urls = proxy_urls({"anthropic-api-key": 8081, "tools-key": 8082})
    rewritten = sidecar_agent(original, plan, urls)
    assert rewritten.provider.base_url == f"http://{PROXY_ALIAS}:8081"
    by_name = {m.name: m for m in rewritten.mcp_servers}
    assert by_name["tools"].url == f"http://{PROXY_ALIAS}:8082/mcp/"  # the path kept as written
    assert by_name["other"] == original.mcp_servers[1]  # no route: through the egress proxy
    assert by_name["lookalike"] == original.mcp_servers[2]  # not below the upstream
    assert by_name["local"] == original.mcp_servers[3]
    assert original.mcp_servers[0].url == "https://tools.example.test/mcp/"  # a copy was changed


def test_sandbox_settings_per_injection(tmp_path: Path) -> None:
    s = spec(
        ANTHROPIC,
        CredentialRef(name="gh", injection=CredentialInjection.env_var("GH_TOKEN")),
        CredentialRef(name="deploy", injection=CredentialInjection.file("/run/secrets/deploy")),
    )
    values = {"anthropic-api-key": "sk-ant-xyz-123456", "gh": "ghp_abcdef", "deploy": "key-material-1"}
    w = wiring(s, values, tmp_path)
    settings = w.sandbox_settings()
    env = settings["environment"]
    assert env["GH_TOKEN"] == "ghp_abcdef"
    assert env["HTTPS_PROXY"] == f"http://{PROXY_ALIAS}:3128" and env["NO_PROXY"] == PROXY_ALIAS
    assert "sk-ant-xyz-123456" not in json.dumps(settings)  # the sidecar secret stays out
    assert settings["volumes"] == {
        str(tmp_path / "sb-0123456789ab.files" / "2"): {"bind": "/run/secrets/deploy", "mode": "ro"}
    }
    assert settings["network"] == _Net.name and settings["dns"] == ["127.0.0.1"]
    assert w.ports == {"anthropic-api-key": CREDENTIAL_PORT_BASE}


def test_files_and_bundle_config(tmp_path: Path) -> None:
    s = spec(
        ANTHROPIC, CredentialRef(name="deploy", injection=CredentialInjection.file("/run/secrets/deploy"))
    )
    values = {"anthropic-api-key": "sk-ant-xyz-123456", "deploy": "key-material-1"}
    w = wiring(s, values, tmp_path)
    w.write_files()
    secret_file = tmp_path / "sb-0123456789ab.proxy" / f"secret-{CREDENTIAL_PORT_BASE}"
    assert secret_file.read_text() == "sk-ant-xyz-123456" and secret_file.stat().st_mode & 0o777 == 0o400
    cred_file = tmp_path / "sb-0123456789ab.files" / "1"
    assert cred_file.read_text() == "key-material-1" and cred_file.stat().st_mode & 0o777 == 0o400
    text = w.bundle_config_json()
    assert "sk-ant-xyz-123456" not in text and "key-material-1" not in text
    config = BundleConfig.model_validate_json(text)
    assert config.clients == ("172.30.0.0/16",) and config.egress_port == 3128
    (listener,) = config.credentials
    assert listener.route.upstream == "https://api.anthropic.com" and listener.secret_file.endswith(
        secret_file.name
    )
    assert w.remove_dirs() == [] and list(tmp_path.iterdir()) == []


def test_no_network_without_egress(tmp_path: Path) -> None:
    w = wiring(
        EnvironmentSpec(credentials=[CredentialRef(name="gh", injection=CredentialInjection.env_var("GH"))]),
        {"gh": "v-1234"},
        tmp_path,
    )
    assert not w.needs_network
    assert "network" not in w.sandbox_settings()


async def test_resolve_credentials() -> None:
    plan = compile_plan(spec(ANTHROPIC))
    assert (await resolve_credentials(plan, EnvSecretResolver({"ANTHROPIC_API_KEY": "k-1234"}))).values == {
        "anthropic-api-key": "k-1234"
    }
    with pytest.raises(EnvError) as e:
        await resolve_credentials(plan, None)
    assert e.value.kind == "credential_failed" and "secret resolver" in str(e.value)
    with pytest.raises(EnvError) as e:
        await resolve_credentials(plan, EnvSecretResolver({}))
    assert e.value.kind == "credential_failed" and "anthropic-api-key" in str(e.value)


@pytest.mark.parametrize(
    ("peer", "admitted"),
    [
        (("172.30.4.5", 5555), True),
        (("::ffff:172.30.4.5", 5555, 0, 0), True),
        (("172.31.0.1", 5555), False),
        (("fe80::1%eth0", 1, 0, 2), False),
        ("garbage", False),
    ],
)
def test_client_filter(peer: Any, admitted: bool) -> None:
    assert ClientFilter(["172.30.0.0/16"]).admits(peer) is admitted
    assert ClientFilter().admits(peer) is True

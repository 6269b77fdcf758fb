"""The Kubernetes backend on an IPv6 (or IPv6-primary dual-stack) cluster.

Pod IPs are IPv6: the sandbox's proxy URLs carry brackets, ``NO_PROXY`` a bare address every
common client accepts, the runner and the proxies listen on every family, the channel's
target is ``[ip]:port``, and the controller's own address is found in the pod network's
family. The stand-in gives pods IPv6 addresses (``ScriptedPods(ip_family=6)``); the only
traffic is to runners the tests start on loopback (``::1``), and those tests skip, saying
why, where ``::1`` cannot be bound.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests.utils

from airlock.proxy import EgressEvent
from airlock.proxy.bundle import EVERY_FAMILY, BundleConfig
from airlock.sandbox import SandboxRequest
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings, _backend, _channel, _own_address
from airlock.sandbox.kubernetes._channel import pod_ip_target
from airlock.sandbox.kubernetes._names import EGRESS_PORT, LABEL_ROLE, RUNNER_PORT
from airlock.sandbox.kubernetes._own_address import choose_address
from airlock.sandbox.kubernetes._proxy_log import READY_LINE
from airlock.sandbox.kubernetes._render import render_pod
from airlock.testing import KubeApiStandIn, PodScript, ScriptedPods, bash_agent, calculator_agent
from layer0 import EnvError, EnvironmentSpec, NetworkAction, NetworkPolicy, NetworkRule, TurnInput
from tests.support.ipv6 import needs_ipv6_loopback
from tests.support.kube import RunnerPods, free_port, recorded_guard

from .test_render import case_shape

NS = "airlock-sandboxes"
PROXY_V6 = "fd00:10:244::7"


def runner_env(pod: dict[str, Any]) -> dict[str, str]:
    runner = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
    return {e["name"]: e["value"] for e in runner["env"] if "value" in e}


# --- rendering ------------------------------------------------------------------------------


def test_a_v6_proxy_ip_renders_bracketed_urls_and_a_bare_no_proxy() -> None:
    env = runner_env(render_pod(case_shape("domain_sidecar"), proxy_ip=PROXY_V6))
    url = f"http://[{PROXY_V6}]:{EGRESS_PORT}"
    assert {env[k] for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")} == {url}
    assert env["NO_PROXY"] == env["no_proxy"] == PROXY_V6


def test_the_rendered_proxy_env_works_in_the_clients_sandboxes_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx (every provider SDK) and requests bypass the proxy for the credential proxy
    and use it for the rest. A bracketed NO_PROXY entry would make httpx refuse to build a
    client at all (``InvalidURL``), which is why the entry is bare."""
    env = runner_env(render_pod(case_shape("domain_sidecar"), proxy_ip=PROXY_V6))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.setenv(name, env[name])
    sidecar = f"http://[{PROXY_V6}]:3129/v1/messages"
    elsewhere = "https://api.example.org/"
    with httpx.Client() as client:
        transport = client._transport_for_url
        assert transport(httpx.URL(sidecar)) is client._transport  # direct
        assert transport(httpx.URL(elsewhere)) is not client._transport  # through the proxy
    assert requests.utils.should_bypass_proxies(sidecar, None)
    assert not requests.utils.should_bypass_proxies(elsewhere, None)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, f"[{PROXY_V6}]")
    with pytest.raises(httpx.InvalidURL):
        httpx.Client()


def test_the_runner_and_the_proxies_listen_on_every_family() -> None:
    shape = case_shape("domain_sidecar")
    runner = next(
        c for c in render_pod(shape, proxy_ip=PROXY_V6)["spec"]["containers"] if c["name"] == "runner"
    )
    assert runner["args"][:2] == ["--listen", f"[::]:{RUNNER_PORT}"]
    from airlock.sandbox.kubernetes._render import bundle_config

    assert bundle_config(shape).host == EVERY_FAMILY


def test_the_channel_target_of_a_v6_pod_has_brackets() -> None:
    assert pod_ip_target({"status": {"podIP": PROXY_V6}}) == f"[{PROXY_V6}]:{RUNNER_PORT}"
    assert pod_ip_target({"status": {"podIP": "10.244.0.7"}}) == f"10.244.0.7:{RUNNER_PORT}"
    assert pod_ip_target({"status": {}}) is None


# --- the controller's own address -----------------------------------------------------------


def test_the_own_address_prefers_the_cluster_family_and_skips_loopback() -> None:
    found = ["127.0.0.1", "fe80::1%eth0", "10.244.0.5", "fd00:10:244::5", "::1"]
    assert choose_address(found, prefer_version=6) == "fd00:10:244::5"
    assert choose_address(found, prefer_version=4) == "10.244.0.5"
    assert choose_address(found, prefer_version=None) == "10.244.0.5"
    assert choose_address(["fd00:10:244::5"], prefer_version=4) == "fd00:10:244::5"  # IPv6-only
    assert choose_address(["127.0.0.1", "::1", "not an ip"], prefer_version=None) is None


@pytest.mark.parametrize(
    ("service_host", "expected"), [("fd00:10:96::1", "fd00:10:244::5"), ("10.96.0.1", "10.244.0.5")]
)
async def test_host_address_in_a_pod_is_its_ip_in_the_cluster_family(
    monkeypatch: pytest.MonkeyPatch, service_host: str, expected: str
) -> None:
    """The pod's hostname maps to both of its IPs (a dual-stack pod's ``/etc/hosts``)."""
    hostname = socket.gethostname()

    def resolve(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == hostname
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.244.0.5", 0)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd00:10:244::5", 0, 0, 0)),
        ]

    monkeypatch.setattr(_own_address.socket, "getaddrinfo", resolve)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", service_host)
    monkeypatch.setattr(_backend, "in_cluster", lambda: True)
    sandbox = KubernetesBackend(settings=KubernetesSettings(namespace=NS), sweep=False)
    assert await sandbox.host_address() == expected


async def test_host_address_in_a_pod_without_an_address_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unresolvable(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(_own_address.socket, "getaddrinfo", unresolvable)
    monkeypatch.setattr(_backend, "in_cluster", lambda: True)
    sandbox = KubernetesBackend(settings=KubernetesSettings(namespace=NS), sweep=False)
    with pytest.raises(EnvError, match=r"backends\.kubernetes\.host_address"):
        await sandbox.host_address()


# --- the stand-in with IPv6 pod IPs ---------------------------------------------------------


@pytest.fixture
def v6_cluster(tmp_path: Path) -> Iterator[tuple[KubeApiStandIn, ScriptedPods, Path]]:
    pods = ScriptedPods(ip_family=6)
    with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
        yield api, pods, api.write_kubeconfig(tmp_path / "kubeconfig")


def test_the_stand_in_gives_v6_pod_ips_when_asked() -> None:
    pods = ScriptedPods(ip_family=6)
    pod = {"metadata": {"name": "p", "namespace": NS, "uid": "u"}, "spec": {"containers": [{"name": "c"}]}}
    pods.start(pod, lambda name: None, lambda *a: None)
    status = pods.status(pod)
    assert status["podIP"].startswith("fd00:10:244::")
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    with pytest.raises(ValueError, match="ip_family"):
        ScriptedPods(ip_family=5)


async def test_a_proxied_job_on_v6_pod_ips_runs_end_to_end(
    v6_cluster: tuple[KubeApiStandIn, ScriptedPods, Path], tmp_path: Path
) -> None:
    """Proxy pod and sandbox pod on IPv6: the sandbox gets bracketed proxy URLs, the proxy's
    config listens on every family, its events (an IPv6 client) reach the job's sink."""
    api, pods, kubeconfig = v6_cluster
    event = EgressEvent(
        client="[fd00:10:244::3]:5555", phase="decision", method="CONNECT", host="example.org", port=443,
        allowed=True, rule="allow example.org:443", reason="allowed",
    )  # fmt: skip
    seen: list[Any] = []

    async def sink(e: Any) -> None:
        seen.append(e)

    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination="example.org", port=443, action=NetworkAction.ALLOW)],
        )
    )
    settings = KubernetesSettings(
        namespace=NS, kubeconfig=str(kubeconfig), connect="port_forward", start_timeout=20
    )
    configs: list[BundleConfig] = []

    def proxy_log(pod: dict[str, Any]) -> str:
        secret = api.get("secrets", NS, pod["metadata"]["name"])  # the proxy pod mounts it
        assert secret is not None
        configs.append(BundleConfig.model_validate_json(base64.b64decode(secret["data"]["config.json"])))
        return f"{READY_LINE}\n{event.model_dump_json()}\n"

    async with RunnerPods(api, pods, NS, tmp_path, proxy_log=proxy_log) as runners:
        request = SandboxRequest.compile(bash_agent("true"), TurnInput.new("go"), spec, events=sink)
        await KubernetesBackend(settings=settings, sweep=False, guard=recorded_guard(NS)).run(request)
    by_role = {p["metadata"]["labels"][LABEL_ROLE]: p for p in runners.seen.values()}
    proxy_ip = runners.ips[by_role["proxy"]["metadata"]["name"]]
    assert ":" in proxy_ip  # IPv6
    env = runner_env(by_role["sandbox"])
    assert env["HTTPS_PROXY"] == f"http://[{proxy_ip}]:{EGRESS_PORT}"
    assert env["NO_PROXY"] == proxy_ip
    assert [c.host for c in configs] == [EVERY_FAMILY]
    egress = [e for e in seen if isinstance(e, EgressEvent)]
    assert [e.client for e in egress] == ["[fd00:10:244::3]:5555"]


@needs_ipv6_loopback
async def test_the_controller_reaches_a_runner_at_a_v6_pod_ip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``connect: pod_ip`` with the sandbox pod at ``::1``: the channel dials ``[::1]:port``,
    where the test's runner listens (on the runner port the channel is given)."""
    port = free_port("::1")
    monkeypatch.setattr(_channel, "RUNNER_PORT", port)
    pods = ScriptedPods(lambda pod: PodScript(pod_ip="::1"), ip_family=6)
    with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        settings = KubernetesSettings(
            namespace=NS, kubeconfig=str(kubeconfig), connect="pod_ip", start_timeout=20
        )
        async with RunnerPods(api, pods, NS, tmp_path, host="::1", port=port) as runners:
            request = SandboxRequest.compile(calculator_agent(), TurnInput.new("go"), EnvironmentSpec())
            output = await KubernetesBackend(settings=settings, sweep=False, guard=recorded_guard(NS)).run(
                request
            )
    assert output.message.as_text() == "17 x 23 = 391."
    assert list(runners.ips.values()) == ["::1"]

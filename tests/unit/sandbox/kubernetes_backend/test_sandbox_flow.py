"""KubernetesBackend's control flow against the stand-in API server, over real HTTP.

The official client talks to :class:`~airlock.testing.KubeApiStandIn`; its scripted pods
take the states a kubelet would report, and each sandbox pod's runner is a real runner
process on this host reached through the stand-in's port-forward (:class:`RunnerPods`).
What this proves: the objects created, their order and their removal, readiness, every
failure path, cancel, RBAC refusals and the reaper. What it cannot: scheduling, admission
beyond RuntimeClass, NetworkPolicy enforcement (see the integration and live tests).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airlock.policy import EnvSecretResolver, compile_plan
from airlock.proxy import EgressEvent
from airlock.runner import RunnerCallError, wait_until_serving
from airlock.sandbox import SandboxRequest, backend
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._names import LABEL_MANAGED, LABEL_OWNER, LABEL_ROLE, MANAGED_BY
from airlock.sandbox.kubernetes._owner import micro_time
from airlock.sandbox.kubernetes._reaper import reap_with
from airlock.sandbox.kubernetes._runner_tls import RUNNER_NAME, VALIDITY, RunnerCertificate
from airlock.spec import AgentSpec
from airlock.testing import KubeApiStandIn, PodScript, ScriptedPods, bash_agent, calculator_agent
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    GvisorIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TurnConfig,
    TurnInput,
)
from tests.support.kube import RunnerPods, recorded_guard, until

NS = "airlock-sandboxes"
KINDS = ("pods", "secrets", "networkpolicies")


class Cluster:
    """The stand-in, its scripted pods, and a sandbox configured for it."""

    def __init__(self, api: KubeApiStandIn, pods: ScriptedPods, kubeconfig: Path, work: Path) -> None:
        self.api = api
        self.pods = pods
        self.kubeconfig = kubeconfig
        self.work = work

    def settings(self, **overrides: Any) -> KubernetesSettings:
        values: dict[str, Any] = {
            "namespace": NS,
            "kubeconfig": str(self.kubeconfig),
            "connect": "port_forward",
            "start_timeout": 20.0,
        }
        return KubernetesSettings(**{**values, **overrides})

    def sandbox(self, **overrides: Any) -> KubernetesBackend:
        secrets = overrides.pop("secrets", None)
        guard = overrides.pop("guard", recorded_guard(NS))
        return KubernetesBackend(
            settings=self.settings(**overrides), secrets=secrets, sweep=False, guard=guard
        )

    def runners(self, **options: Any) -> RunnerPods:
        return RunnerPods(self.api, self.pods, NS, self.work, **options)

    def left(self) -> dict[str, list[str]]:
        """The airlock objects of sandboxes still in the namespace (the default-deny policy
        and owner Leases are not a sandbox's)."""
        found: dict[str, list[str]] = {}
        for kind in KINDS:
            names = [
                o["metadata"]["name"]
                for o in self.api.objects(kind, NS)
                if LABEL_OWNER in (o["metadata"].get("labels") or {})
            ]
            if names:
                found[kind] = names
        return found


@pytest.fixture
def script() -> dict[str, PodScript]:
    """Per role (``sandbox``/``proxy``), what its pods do (default: run)."""
    return {}


@pytest.fixture
def cluster(tmp_path: Path, script: dict[str, PodScript]) -> Iterator[Cluster]:
    def play(pod: dict[str, Any]) -> PodScript:
        return script.get(pod["metadata"]["labels"].get(LABEL_ROLE, ""), PodScript())

    pods = ScriptedPods(play)
    with KubeApiStandIn(pods=pods, namespaces=(NS,), runtime_classes={"gvisor": "runsc"}) as api:
        yield Cluster(api, pods, api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


def request(
    agent: AgentSpec, spec: EnvironmentSpec | None = None, message: str = "go", **kw: Any
) -> SandboxRequest:
    return SandboxRequest.compile(agent, TurnInput.new(message), spec or EnvironmentSpec(), **kw)


def allow(destination: str, port: int | None = None) -> NetworkRule:
    return NetworkRule(destination=destination, port=port, action=NetworkAction.ALLOW)


async def test_a_scripted_job_completes_and_leaves_nothing_behind(cluster: Cluster) -> None:
    async with cluster.runners():
        output = await cluster.sandbox().run(request(calculator_agent()))
    assert output.message.as_text() == "17 x 23 = 391."
    assert cluster.left() == {}
    # what was there: the pod (runner + token init container), its Secret and policy; no proxy
    created = [(m, p) for m, p in cluster.api.requests if m == "POST"]
    kinds = [p.rsplit("/", 1)[-1] for _, p in created]
    assert kinds.count("pods") == 1 and kinds.count("secrets") == 1 and kinds.count("networkpolicies") == 2
    policies = {o["metadata"]["name"] for o in cluster.api.objects("networkpolicies", NS)}
    assert policies == {"airlock-default-deny"}
    leases = cluster.api.objects("leases", NS)
    assert len(leases) == 1 and leases[0]["spec"]["holderIdentity"]


async def test_the_pod_and_secret_as_created(cluster: Cluster) -> None:
    seen: dict[str, Any] = {}

    async def capture() -> None:
        await until(lambda: cluster.api.objects("pods", NS))
        pod = cluster.api.objects("pods", NS)[0]
        seen["pod"] = pod
        seen["secret"] = cluster.api.get("secrets", NS, pod["metadata"]["name"])

    spec = EnvironmentSpec(
        credentials=[CredentialRef(name="tok", injection=CredentialInjection.env_var("TOK"))],
    )
    secrets = EnvSecretResolver({"TOK": "value-in-the-sandbox-1234"})
    async with cluster.runners():
        watcher = asyncio.create_task(capture())
        agent = bash_agent("echo $TOK | wc -c", defaults=TurnConfig(max_duration=30_000))
        output = await cluster.sandbox(secrets=secrets).run(request(agent, spec))
        await watcher
    assert "[REDACTED]" not in (output.message.as_text() or "")
    pod, secret = seen["pod"], seen["secret"]
    owner = pod["metadata"]["ownerReferences"][0]
    assert (
        owner["kind"] == "Lease" and owner["uid"] == cluster.api.objects("leases", NS)[0]["metadata"]["uid"]
    )
    assert pod["spec"]["automountServiceAccountToken"] is False
    runner = pod["spec"]["containers"][0]
    assert {
        "name": "TOK",
        "valueFrom": {"secretKeyRef": {"name": pod["metadata"]["name"], "key": "cred-0"}},
    } in runner["env"]
    assert base64.b64decode(secret["data"]["cred-0"]).decode() == "value-in-the-sandbox-1234"
    # a backstop past the controller's own deadline: start timeout + 30 s + 5 s grace + 60 s margin
    assert pod["spec"]["activeDeadlineSeconds"] == 20 + 35 + 60


async def test_a_proxied_sandbox_gets_its_proxy_and_its_events(cluster: Cluster) -> None:
    event = EgressEvent(
        client="10.244.0.2:5555", phase="decision", method="CONNECT", host="api.github.com", port=443,
        allowed=False,
        rule="default", reason="no rule allows api.github.com:443",
    )  # fmt: skip
    from airlock.sandbox.kubernetes._proxy_log import READY_LINE

    seen: list[Any] = []

    async def sink(e: Any) -> None:
        seen.append(e)

    spec = EnvironmentSpec(
        network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow("example.org", 443)])
    )
    async with cluster.runners(
        proxy_log=lambda pod: f"{READY_LINE}\n{event.model_dump_json()}\n{{not json\n"
    ) as runners:
        await cluster.sandbox().run(request(bash_agent("true"), spec, events=sink))
    proxy, sandbox = sorted(
        runners.seen.values(), key=lambda p: p["metadata"]["name"].endswith("-proxy"), reverse=True
    )
    proxy_ip = runners.ips[proxy["metadata"]["name"]]
    env = {e["name"]: e.get("value") for e in sandbox["spec"]["containers"][0]["env"]}
    assert env["HTTPS_PROXY"] == f"http://{proxy_ip}:3128"
    egress = [e for e in seen if isinstance(e, EgressEvent)]
    assert len(egress) == 1 and egress[0].host == "api.github.com" and not egress[0].allowed
    assert cluster.left() == {}


@pytest.mark.parametrize(
    ("role", "pod_script", "needle"),
    [
        ("sandbox", PodScript(phase="Pending", waiting_reason="ImagePullBackOff"), "ImagePullBackOff"),
        ("sandbox", PodScript(phase="Pending", waiting_reason="ErrImageNeverPull"), "ErrImageNeverPull"),
        ("sandbox", PodScript(phase="Failed", reason="DeadlineExceeded"), "DeadlineExceeded"),
        ("sandbox", PodScript(phase="Failed", terminated_reason="OOMKilled", exit_code=137), "OOMKilled"),
        ("proxy", PodScript(phase="Pending", waiting_reason="ImagePullBackOff"), "ImagePullBackOff"),
    ],
)  # fmt: skip
async def test_a_pod_that_cannot_start_fails_at_once_with_its_state(
    cluster: Cluster, script: dict[str, PodScript], role: str, pod_script: PodScript, needle: str
) -> None:
    script[role] = pod_script
    spec = EnvironmentSpec(network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow("example.org")]))
    async with cluster.runners():
        began = asyncio.get_running_loop().time()
        with pytest.raises(EnvError) as info:
            await cluster.sandbox().run(request(bash_agent("true"), spec))
        took = asyncio.get_running_loop().time() - began
    assert info.value.kind == "provision_failed"
    assert needle in str(info.value) and "cannot start" in str(info.value)
    assert took < 10  # at once, not at the 20 s start timeout
    assert cluster.left() == {}


async def test_an_unschedulable_pod_fails_at_the_start_timeout_with_its_condition_and_events(
    cluster: Cluster, script: dict[str, PodScript]
) -> None:
    script["sandbox"] = PodScript(
        phase="Pending",
        unschedulable="0/3 nodes are available: 3 Insufficient memory.",
        events=[("Warning", "FailedScheduling", "0/3 nodes are available: 3 Insufficient memory.")],
    )
    with pytest.raises(EnvError) as info:
        await cluster.sandbox(start_timeout=1.0).run(request(bash_agent("true")))
    text = str(info.value)
    assert info.value.kind == "provision_failed" and "not running before the start timeout" in text
    assert "Unschedulable" in text and "event Warning FailedScheduling: 0/3 nodes" in text
    assert cluster.left() == {}


async def test_a_runner_that_never_answers_fails_at_the_start_timeout(cluster: Cluster) -> None:
    async with cluster.runners(runner=False):
        with pytest.raises(EnvError) as info:
            await cluster.sandbox(start_timeout=2.0).run(request(bash_agent("true")))
    assert info.value.kind == "provision_failed" and "not SERVING" in str(info.value)
    assert cluster.left() == {}


async def test_the_runner_channel_is_tls_pinned_to_the_sandboxs_own_certificate(cluster: Cluster) -> None:
    """The runner serves the certificate from its sandbox's Secret, made for that sandbox alone;
    the turn goes through because the controller trusts exactly it (a plaintext client is
    refused by the same runner)."""
    from cryptography import x509

    async with cluster.runners() as runners:
        output = await cluster.sandbox().run(request(calculator_agent()))
        sandbox = next(p for p in runners.seen.values() if p["spec"]["containers"][0]["name"] == "runner")
        served = (cluster.work / sandbox["metadata"]["name"] / "tls.crt").read_bytes()
        target = f"127.0.0.1:{runners.ports[sandbox['metadata']['name']]}"
        await wait_until_serving(target, 10, root_certificates=served, tls_server_name=RUNNER_NAME)
        with pytest.raises(RunnerCallError):
            await wait_until_serving(target, 0.5)
    assert output.message.as_text() == "17 x 23 = 391."
    certificate = x509.load_pem_x509_certificate(served)
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [RUNNER_NAME]
    assert certificate.not_valid_after_utc - certificate.not_valid_before_utc <= VALIDITY + timedelta(
        minutes=5
    )
    args = sandbox["spec"]["containers"][0]["args"]
    assert args[args.index("--tls-cert") + 1] == "/run/airlock-tls/tls.crt"


async def test_a_runner_with_another_certificate_is_refused(cluster: Cluster) -> None:
    """A runner presenting any certificate but its sandbox's own (here a valid one for the same
    name, made by another controller) never gets the turn: the sandbox fails to start."""
    async with cluster.runners(certificate=RunnerCertificate.generate()):
        with pytest.raises(EnvError) as info:
            await cluster.sandbox(start_timeout=3.0).run(request(calculator_agent()))
    assert info.value.kind == "provision_failed" and "not SERVING" in str(info.value)
    assert cluster.left() == {}


async def test_an_oom_kill_during_the_turn_is_resource_exceeded(cluster: Cluster) -> None:
    async with cluster.runners() as runners:
        run = asyncio.create_task(cluster.sandbox().run(request(bash_agent("sleep 20"))))
        await until(lambda: runners.processes)
        await asyncio.sleep(2.0)  # the turn is under way
        (name,) = runners.processes
        cluster.pods.update(NS, name, PodScript(phase="Failed", terminated_reason="OOMKilled", exit_code=137))
        runners.kill_runner(name)
        with pytest.raises(EnvError) as info:
            await run
    assert info.value.kind == "resource_exceeded" and "OOM-killed" in str(info.value)
    assert cluster.left() == {}


async def test_an_oom_kill_the_kubelet_reports_after_the_channel_broke_is_resource_exceeded(
    cluster: Cluster,
) -> None:
    """The runner's channel breaks first; the pod's status says OOMKilled a moment later."""
    async with cluster.runners() as runners:
        run = asyncio.create_task(cluster.sandbox().run(request(bash_agent("sleep 20"))))
        await until(lambda: runners.processes)
        await asyncio.sleep(2.0)  # the turn is under way
        (name,) = runners.processes
        runners.kill_runner(name)
        await asyncio.sleep(1.0)
        cluster.pods.update(NS, name, PodScript(phase="Failed", terminated_reason="OOMKilled", exit_code=137))
        with pytest.raises(EnvError) as info:
            await run
    assert info.value.kind == "resource_exceeded" and "OOM-killed" in str(info.value)
    assert cluster.left() == {}


async def test_past_its_deadline_the_pod_is_deleted_and_the_turn_times_out(cluster: Cluster) -> None:
    agent = bash_agent("sleep 30", defaults=TurnConfig(max_duration=60_000))
    async with cluster.runners() as runners:
        sandbox = cluster.sandbox()
        sandbox.turn_timeout = 2.0  # the environment's hard cap, below the turn's own limit
        output = await sandbox.run(request(agent))
    assert output.exit_reason.kind == "timeout" and "killed" in (output.message.as_text() or "")
    assert "2.0s limit" in (output.message.as_text() or "")
    deleted = [p for m, p in cluster.api.requests if m == "DELETE" and p.endswith(next(iter(runners.seen)))]
    assert deleted  # the pod was deleted at the deadline (and again, harmlessly, at teardown)
    assert cluster.left() == {}


async def test_cancel_mid_provision_leaves_nothing(cluster: Cluster, script: dict[str, PodScript]) -> None:
    script["sandbox"] = PodScript(phase="Pending", delay_s=30)
    run = asyncio.create_task(cluster.sandbox().run(request(bash_agent("true"))))
    await until(lambda: cluster.api.objects("pods", NS))
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert cluster.left() == {}


async def test_a_missing_runtime_class_is_refused_before_anything_is_created(cluster: Cluster) -> None:
    sandbox = cluster.sandbox(runtime_classes={"gvisor": "gvisor-not-installed"})
    with pytest.raises(EnvError) as info:
        await sandbox.run(request(bash_agent("true"), EnvironmentSpec(isolation=[GvisorIsolation()])))
    assert info.value.kind == "isolation_violation" and "never falls back" in str(info.value)
    posted = [p for m, p in cluster.api.requests if m == "POST" and not p.endswith("/networkpolicies")]
    assert posted == []  # no Lease, Secret or pod; only the namespace's default-deny policy


async def test_gvisor_runs_under_its_runtime_class(cluster: Cluster) -> None:
    async with cluster.runners() as runners:
        await cluster.sandbox().run(
            request(bash_agent("true"), EnvironmentSpec(isolation=[GvisorIsolation()]))
        )
    (pod,) = runners.seen.values()
    assert pod["spec"]["runtimeClassName"] == "gvisor"


async def test_rbac_denied_is_a_clear_provision_failure_and_leaves_nothing(cluster: Cluster) -> None:
    cluster.api.deny("create", "pods")
    with pytest.raises(EnvError) as info:
        await cluster.sandbox().run(request(bash_agent("true")))
    assert info.value.kind == "provision_failed" and "RBAC" in str(info.value)
    assert cluster.left() == {}


async def test_an_unreachable_api_server_is_a_provision_failure(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with KubeApiStandIn(namespaces=(NS,)) as api:
        api.write_kubeconfig(kubeconfig)
    sandbox = KubernetesBackend(
        settings=KubernetesSettings(namespace=NS, kubeconfig=str(kubeconfig), start_timeout=2.0), sweep=False
    )
    with pytest.raises(EnvError) as info:
        await sandbox.run(request(bash_agent("true")))
    assert info.value.kind == "provision_failed" and "unreachable" in str(info.value)


async def test_the_reaper_removes_what_expired_owners_left_and_keeps_the_live(cluster: Cluster) -> None:
    now = datetime.now(UTC)

    def lease(name: str, renewed: datetime) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "labels": {LABEL_MANAGED: MANAGED_BY, LABEL_ROLE: "owner"}},
            "spec": {"holderIdentity": "h/1", "leaseDurationSeconds": 60, "renewTime": micro_time(renewed)},
        }  # fmt: skip

    def secret(name: str, owner: str) -> dict[str, Any]:
        labels = {LABEL_MANAGED: MANAGED_BY, LABEL_OWNER: owner}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": labels}}

    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    coordination = client.CoordinationV1Api(core.api_client)
    coordination.create_namespaced_lease(NS, lease("airlock-owner-dead", now - timedelta(minutes=5)))
    coordination.create_namespaced_lease(NS, lease("airlock-owner-live", now))
    core.create_namespaced_secret(NS, secret("airlock-sb-dead", "airlock-owner-dead"))
    core.create_namespaced_secret(NS, secret("airlock-sb-orphan", "airlock-owner-never-existed"))
    core.create_namespaced_secret(NS, secret("airlock-sb-live", "airlock-owner-live"))
    sandbox = cluster.sandbox()
    from airlock.sandbox.kubernetes import SANDBOX_ACCESS
    from airlock.sandbox.kubernetes._api import KubeApi

    api = await KubeApi.connect(sandbox.settings, SANDBOX_ACCESS)
    report = await reap_with(api, sandbox.settings)
    # An owner with no Lease may be a controller that created its Lease after the sweep listed
    # the Leases: its fresh objects stay until they are older than a lease period.
    assert sorted(report.items()) == [("lease", "airlock-owner-dead"), ("secret", "airlock-sb-dead")]
    later = datetime.now(UTC) + timedelta(seconds=sandbox.settings.lease_seconds + 1)
    orphaned = await reap_with(api, sandbox.settings, now=later)
    assert orphaned.items() == [("secret", "airlock-sb-orphan")]
    assert [o["metadata"]["name"] for o in cluster.api.objects("secrets", NS)] == ["airlock-sb-live"]
    everything = await reap_with(api, sandbox.settings, include_live=True)
    assert ("secret", "airlock-sb-live") in everything.items()
    # and the registry's reaper (airlock gc --backend kubernetes) finds the same cluster
    reaper = backend("kubernetes").reap
    assert reaper is not None
    swept = await reaper(settings=sandbox.settings)
    assert swept is not None and swept.removed == 0


async def test_the_policy_objects_airlock_agents_show_prints() -> None:
    plan = compile_plan(
        EnvironmentSpec(network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow("example.org")]))
    )
    render = backend("kubernetes").policy_objects
    assert render is not None
    objects = render(plan, None)
    assert [o["metadata"]["name"] for o in objects] == [
        "airlock-default-deny", "airlock-sb-0000000000000000", "airlock-sb-0000000000000000-proxy",
    ]  # fmt: skip

"""The Kubernetes backend on a real cluster: what no stand-in API server can show.

A pod really scheduled and hardened, a NetworkPolicy-enforcing CNI really dropping what the
plan denies, and a sidecar secret absent from everything the sandbox pod is made of. They run
only when a cluster is configured:

* ``KUBECONFIG``: a kubeconfig file whose user may read and annotate the namespace and
  manage pods, pods/log, pods/portforward, Secrets, NetworkPolicies and Leases in it (what
  ``airlock doctor`` checks);
* ``AIRLOCK_K8S_IMAGE``: the runner image, pushed to a registry the nodes pull from;
* ``AIRLOCK_K8S_NAMESPACE``: the sandbox namespace, which must exist (default
  ``airlock-sandboxes``);
* a CNI that enforces NetworkPolicy (Calico, Cilium, …): on one that does not, the
  denied-destination test fails, as it should.

Besides the sandboxes, the module starts one HTTP server pod (the runner image running a
few lines of Python) in the namespace, with a NetworkPolicy admitting any pod of the
namespace to it, so that only a sandbox's own policy can keep it out; a probe pod allowed to
reach it proves it answers. Both are deleted at the end. No traffic leaves the cluster.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import os
import secrets
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airlock.policy import EnvSecretResolver, SecretResolver
from airlock.policy.plan import SidecarRoute
from airlock.proxy import EgressEvent
from airlock.sandbox import SandboxEventSink, SandboxRequest
from airlock.sandbox.kubernetes import EnforcementSettings, KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._names import LABEL_JOB, LABEL_ROLE, LABEL_SANDBOX, object_name
from airlock.spec import AgentSpec
from airlock.testing import bash_agent
from airlock.turn import ToolFinished, ToolStarted
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TurnConfig,
    TurnInput,
    TurnOutput,
)


def _skip_reason() -> str | None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        return "KUBECONFIG is not set: live Kubernetes tests need a real cluster (see README, Kubernetes)"
    if not (Path(kubeconfig).is_file() and os.access(kubeconfig, os.R_OK)):
        return f"KUBECONFIG={kubeconfig} names no readable file: live Kubernetes tests need a real cluster"
    if not os.environ.get("AIRLOCK_K8S_IMAGE"):
        return (
            "AIRLOCK_K8S_IMAGE is not set: the runner image, pushed to a registry the cluster's nodes "
            "pull from (see README, Kubernetes)"
        )
    return None


SKIP_REASON = _skip_reason()

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or ""),
    # image pulls and pod scheduling on a real cluster take their time
    pytest.mark.timeout(900),
]

SERVER_PORT = 8080
#: Labels of the pods this module starts itself (never airlock's: the reaper leaves them alone).
TEST_LABEL = "airlock-live-test/run"
TEST_ROLE = "airlock-live-test/role"
#: What every pod this module starts runs as, hardened like a sandbox (a namespace may enforce
#: the restricted Pod Security Standard).
NOBODY = 65534

#: The HTTP server pod: answers ``live-server:<path>``, logs each request's path.
SERVER = """
import http.server
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("request", self.path, flush=True)
        body = ("live-server:" + self.path).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("", 8080), Handler)
print("ready", flush=True)
server.serve_forever()
"""

#: The probe pod: fetches its URL directly (retrying while the policies settle), prints the body.
PROBE = """
import sys, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
deadline = time.monotonic() + 60
while True:
    try:
        print("body", opener.open(sys.argv[1], timeout=5).read().decode(), flush=True)
        break
    except OSError as e:
        if time.monotonic() > deadline:
            print("failed", e, flush=True)
            sys.exit(1)
        time.sleep(2)
"""

#: In the sandbox: the URL through the sandbox's HTTP proxy settings, then directly.
FETCH = """
import os, sys, urllib.request
print("proxy", os.environ.get("HTTP_PROXY", "none"))
direct = urllib.request.ProxyHandler({})
openers = (("via-proxy", urllib.request.build_opener()), ("direct", urllib.request.build_opener(direct)))
for label, opener in openers:
    try:
        print(label, "REACHED", opener.open(sys.argv[1], timeout=10).read().decode())
    except Exception as e:
        print(label, "FAILED", type(e).__name__, e)
"""

#: In the sandbox: its environment and every file under /run and /workspace (contents
#: included), hex-encoded so that the controller's redaction of tool output cannot hide a leak.
DUMP = """
import os
parts = [b"== env"] + [k + b"=" + v for k, v in sorted(os.environb.items())]
for top in ("/run", "/workspace"):
    for root, dirs, files in os.walk(top):
        parts.append(b"== dir " + root.encode())
        for name in files:
            path = os.path.join(root, name)
            parts.append(b"== file " + path.encode())
            try:
                with open(path, "rb") as f:
                    parts.append(f.read(1 << 20))
            except OSError as e:
                parts.append(b"unreadable " + str(e).encode())
print(b"\\n".join(parts).hex())
"""


def python(program: str, *args: str) -> str:
    """A bash command running ``program`` with ``python3 -c``."""
    return shlex.join(["python3", "-c", program, *args])


# --- the cluster, through the official client ---------------------------------------------


@dataclass
class Live:
    """The configured cluster: the official client, the namespace, the runner image."""

    api_client: Any
    kubeconfig: str
    namespace: str
    image: str
    run_id: str
    #: What the enforcement proof and the runners' fence treat as the metadata service: this
    #: module's server pod (set by its fixture), so no traffic leaves the cluster.
    metadata: str = ""

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @property
    def networking(self) -> Any:
        from kubernetes import client

        return client.NetworkingV1Api(self.api_client)

    def settings(self) -> KubernetesSettings:
        assert self.metadata, "use the server fixture: it is the proof's stand-in metadata address"
        return KubernetesSettings(
            namespace=self.namespace,
            image=self.image,
            kubeconfig=self.kubeconfig,
            connect="auto",
            enforcement=EnforcementSettings(metadata_address=self.metadata),
        )

    def sandbox(self, resolver: SecretResolver | None = None) -> KubernetesBackend:
        # sweep=False: these tests touch only the sandboxes they start themselves.
        return KubernetesBackend(
            settings=self.settings(), secrets=resolver or EnvSecretResolver({}), sweep=False
        )

    def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """An API answer as the server sent it (JSON, not the client's models)."""
        response = fn(*args, _preload_content=False, **kwargs)
        data: dict[str, Any] = json.loads(response.data)
        return data

    def pod(self, name: str) -> dict[str, Any]:
        return self.read(self.core.read_namespaced_pod, name, self.namespace)

    def log(self, name: str) -> str:
        text: str = self.core.read_namespaced_pod_log(name, self.namespace)
        return text

    def wait_pod(
        self, name: str, done: Callable[[dict[str, Any]], bool], what: str, timeout: float = 180.0
    ) -> dict[str, Any]:
        """The pod once ``done(pod)``; fails with its status after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            pod = self.pod(name)
            if done(pod):
                return pod
            assert time.monotonic() < deadline, f"pod {name} not {what}: {json.dumps(pod.get('status'))}"
            time.sleep(1)

    def start(self, pod: dict[str, Any], policy: dict[str, Any]) -> None:
        self.networking.create_namespaced_network_policy(self.namespace, policy)
        self.core.create_namespaced_pod(self.namespace, pod)

    def stop(self, name: str) -> None:
        """Delete this module's pod ``name`` and its NetworkPolicy (absent ones are fine)."""
        from kubernetes.client.exceptions import ApiException

        for delete in (self.core.delete_namespaced_pod, self.networking.delete_namespaced_network_policy):
            try:
                delete(name, self.namespace, grace_period_seconds=0)
            except ApiException as e:
                if e.status != 404:
                    raise

    def sandbox_objects(self, sandbox_id: str) -> dict[str, list[dict[str, Any]]]:
        """The sandbox's pods, Secrets and NetworkPolicies still in the namespace, by kind."""
        selector = f"{LABEL_SANDBOX}={sandbox_id}"
        listings = {
            "pods": self.core.list_namespaced_pod,
            "secrets": self.core.list_namespaced_secret,
            "networkpolicies": self.networking.list_namespaced_network_policy,
        }
        found = {
            kind: self.read(fn, self.namespace, label_selector=selector)["items"]
            for kind, fn in listings.items()
        }
        return {kind: items for kind, items in found.items() if items}

    def assert_removed(self, sandbox_id: str, timeout: float = 60.0) -> None:
        """Every object of the sandbox is gone (pods may take a moment to finish terminating)."""
        deadline = time.monotonic() + timeout
        while left := self.sandbox_objects(sandbox_id):
            names = {kind: [o["metadata"]["name"] for o in items] for kind, items in left.items()}
            assert time.monotonic() < deadline, f"sandbox {sandbox_id} left {names}"
            time.sleep(1)


def plain_pod(live: Live, name: str, role: str, program: str, *args: str) -> dict[str, Any]:
    """A pod of this module running ``python3 -c program args`` from the runner image."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {TEST_LABEL: live.run_id, TEST_ROLE: role}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": NOBODY,
                "runAsGroup": NOBODY,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": role,
                    "image": live.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", program, *args],
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "64Mi"},
                        "limits": {"cpu": "200m", "memory": "64Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def pod_policy(live: Live, name: str, role: str, rule: dict[str, Any], direction: str) -> dict[str, Any]:
    """A NetworkPolicy of this module: ``rule`` for the pods of ``role``, one ``direction``."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": {TEST_LABEL: live.run_id}},
        "spec": {
            "podSelector": {"matchLabels": {TEST_LABEL: live.run_id, TEST_ROLE: role}},
            "policyTypes": [direction],
            direction.lower(): [rule],
        },
    }


@dataclass(frozen=True)
class Server:
    """This module's HTTP server pod."""

    name: str
    ip: str

    @property
    def host(self) -> str:
        return f"[{self.ip}]" if ":" in self.ip else self.ip

    @property
    def cidr(self) -> str:
        return str(ipaddress.ip_network(self.ip))

    def url(self, path: str) -> str:
        return f"http://{self.host}:{SERVER_PORT}{path}"


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    from kubernetes import config

    kubeconfig = os.environ["KUBECONFIG"]
    api_client = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    try:
        yield Live(
            api_client=api_client,
            kubeconfig=kubeconfig,
            namespace=os.environ.get("AIRLOCK_K8S_NAMESPACE", "airlock-sandboxes"),
            image=os.environ["AIRLOCK_K8S_IMAGE"],
            run_id=secrets.token_hex(4),
        )
    finally:
        api_client.close()


@pytest.fixture(scope="module")
def server(live: Live) -> Iterator[Server]:
    """The HTTP server pod, admitting any pod of the namespace on its port."""
    name = f"airlock-live-http-{live.run_id}"
    any_pod = {"from": [{"podSelector": {}}], "ports": [{"protocol": "TCP", "port": SERVER_PORT}]}
    try:
        live.start(
            plain_pod(live, name, "server", SERVER), pod_policy(live, name, "server", any_pod, "Ingress")
        )
        pod = live.wait_pod(
            name,
            lambda p: (p.get("status") or {}).get("phase") == "Running" and bool(p["status"].get("podIP")),
            "running",
        )
        deadline = time.monotonic() + 60
        while "ready" not in live.log(name):
            assert time.monotonic() < deadline, f"server pod {name} never ready: {live.log(name)}"
            time.sleep(1)
        found = Server(name=name, ip=pod["status"]["podIP"])
        live.metadata = f"{found.host}:{SERVER_PORT}"
        yield found
    finally:
        live.stop(name)


def probe(live: Live, server: Server, path: str) -> str:
    """What a plain pod allowed to reach the server gets from ``path`` (the control: it answers)."""
    name = f"airlock-live-probe-{live.run_id}"
    to_server = {
        "to": [{"podSelector": {"matchLabels": {TEST_LABEL: live.run_id, TEST_ROLE: "server"}}}],
        "ports": [{"protocol": "TCP", "port": SERVER_PORT}],
    }
    try:
        live.start(
            plain_pod(live, name, "probe", PROBE, server.url(path)),
            pod_policy(live, name, "probe", to_server, "Egress"),
        )
        pod = live.wait_pod(
            name, lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"), "finished"
        )
        log = live.log(name)
        assert pod["status"]["phase"] == "Succeeded", log
        return log
    finally:
        live.stop(name)


# --- running a turn ------------------------------------------------------------------------


class Recorder:
    """An event sink keeping every event (tool output arrives as ToolFinished events)."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def __call__(self, event: Any) -> None:
        self.events.append(event)

    def results(self) -> dict[str, dict[str, Any]]:
        """Each bash call's result (stdout, stderr, …) by tool-use id (``t0``, ``t1``, …)."""
        return {e.tool_use_id: json.loads(e.output) for e in self.events if isinstance(e, ToolFinished)}


def request(agent: AgentSpec, spec: EnvironmentSpec, sink: SandboxEventSink, **kw: Any) -> SandboxRequest:
    return SandboxRequest.compile(agent, TurnInput.new("go"), spec, events=sink, **kw)


def allow(destination: str, port: int) -> NetworkRule:
    return NetworkRule(destination=destination, port=port, action=NetworkAction.ALLOW)


def sandbox_id_of(hostname: str) -> str:
    """The sandbox id from its pod's host name (``airlock-sb-<16 hex>``)."""
    pod = hostname.strip()
    assert pod.startswith("airlock-sb-"), pod
    return pod.removeprefix("airlock-")


def assert_completed(output: TurnOutput) -> None:
    assert output.exit_reason.kind == "complete", output
    assert output.message.as_text() == "done"


# --- the tests -----------------------------------------------------------------------------


async def test_the_controller_proves_enforcement_before_any_job(live: Live, server: Server) -> None:
    # The prober (a deny-all sandbox's labels and policy) must reach neither the canary nor this
    # module's server pod, which admits every pod of the namespace: only the prober's own
    # policy keeps it out. The control pod must reach the canary.
    proof = await live.sandbox().isolation_proof()
    evidence = "\n".join(proof.evidence)
    assert proof.status == "enforced", f"{proof.reason}\n{evidence}"
    assert any(line.startswith("prober → cloud metadata") for line in proof.evidence), evidence
    found = await asyncio.to_thread(live.read, live.core.read_namespace, live.namespace)
    assert "airlock.dev/network-policy-enforcement" in found["metadata"]["annotations"]


async def test_a_scripted_job_runs_in_a_hardened_pod(live: Live, server: Server) -> None:
    agent = bash_agent(
        "uname -n",
        "id -u; id -g",
        "touch /x; echo rc=$?",
        "touch /workspace/ok && echo workspace-writable",
    )
    sink = Recorder()
    output = await live.sandbox().run(request(agent, EnvironmentSpec(), sink))
    assert_completed(output)
    assert [call.name for call in output.metadata.tools_called] == ["bash"] * 4
    results = sink.results()
    sandbox_id = sandbox_id_of(results["t0"]["stdout"])
    assert results["t1"]["stdout"].split() == [str(NOBODY), str(NOBODY)]
    assert "rc=1" in results["t2"]["stdout"]
    assert "Read-only file system" in results["t2"]["stderr"]
    assert results["t3"]["stdout"].strip() == "workspace-writable"
    await asyncio.to_thread(live.assert_removed, sandbox_id)


async def test_a_denied_destination_is_unreachable_from_the_pod(live: Live, server: Server) -> None:
    # The control: a pod allowed to reach the server gets its answer.
    reply = await asyncio.to_thread(probe, live, server, "/probe")
    assert "body live-server:/probe" in reply
    # The sandbox's policy allows one other destination (so it gets a proxy), never the server.
    spec = EnvironmentSpec(
        network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow("192.0.2.10/32", 443)])
    )
    agent = bash_agent("uname -n", python(FETCH, server.url("/from-sandbox")))
    sink = Recorder()
    output = await live.sandbox().run(request(agent, spec, sink))
    assert_completed(output)
    results = sink.results()
    sandbox_id = sandbox_id_of(results["t0"]["stdout"])
    lines = {line.split(" ", 1)[0]: line for line in results["t1"]["stdout"].splitlines()}
    assert lines["proxy"].startswith("proxy http://"), lines  # the sandbox had its proxy
    assert lines["via-proxy"].startswith("via-proxy FAILED HTTPError HTTP Error 403"), lines  # the proxy's
    assert lines["direct"].startswith("direct FAILED"), lines  # dropped by the NetworkPolicy
    assert "REACHED" not in results["t1"]["stdout"]
    # The proxy refused it (its decision reached the controller through the proxy pod's log) …
    decisions = [
        e for e in sink.events if isinstance(e, EgressEvent) and e.host == server.ip and e.port == SERVER_PORT
    ]
    assert decisions and not any(e.allowed for e in decisions), decisions
    # … and nothing of the sandbox's reached the server, which did answer the probe.
    log = await asyncio.to_thread(live.log, server.name)
    assert "request /probe" in log
    assert "/from-sandbox" not in log
    await asyncio.to_thread(live.assert_removed, sandbox_id)


async def test_the_sidecar_secret_is_absent_from_the_sandbox_pod(live: Live, server: Server) -> None:
    value = "sk-live-" + secrets.token_hex(20)
    forms = [value, base64.b64encode(value.encode()).decode(), f"Bearer {value}"]
    spec = EnvironmentSpec(
        network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow(server.cidr, SERVER_PORT)]),
        credentials=[CredentialRef(name="live-key", injection=CredentialInjection.sidecar())],
    )
    route = SidecarRoute(
        upstream=f"http://{server.host}:{SERVER_PORT}", header="authorization", value_prefix="Bearer "
    )
    agent = bash_agent(python(DUMP), "uname -n", "sleep 20")
    sink = Recorder()
    sleeping = asyncio.Event()
    seen: dict[str, Any] = {}

    async def record(event: Any) -> None:
        await sink(event)
        if isinstance(event, ToolFinished) and event.tool_use_id == "t1":
            seen["pod"] = json.loads(event.output)["stdout"].strip()
        if isinstance(event, ToolStarted) and event.tool_use_id == "t2":
            sleeping.set()

    def read_while_running(pod_name: str) -> None:
        sandbox_id = sandbox_id_of(pod_name)
        seen["pod_object"] = live.pod(pod_name)
        seen["objects"] = live.sandbox_objects(sandbox_id)

    async def watch() -> None:
        await sleeping.wait()
        await asyncio.to_thread(read_while_running, seen["pod"])

    watcher = asyncio.create_task(watch())
    try:
        sandbox = live.sandbox(EnvSecretResolver({"LIVE_KEY": value}))
        output = await sandbox.run(request(agent, spec, record, sidecar_routes={"live-key": route}))
        await asyncio.wait_for(watcher, 30)
    finally:
        watcher.cancel()
    assert_completed(output)
    sandbox_id = sandbox_id_of(seen["pod"])

    # What the sandbox itself could see: its environment and files (hex-decoded here).
    dump = bytes.fromhex(sink.results()["t0"]["stdout"].strip())
    assert b"== env\n" in dump and b"\nHTTPS_PROXY=http://" in dump  # the dump is what it claims
    assert b"== dir /run\n" in dump and b"== dir /workspace\n" in dump
    assert not [f for f in forms if f.encode() in dump]

    # What the cluster held while the turn ran: the pod and the sandbox's Secret lack it …
    pod = seen["pod_object"]
    assert pod["status"]["phase"] == "Running"
    assert not [f for f in forms if f in json.dumps(pod)]
    by_role: dict[str, list[dict[str, Any]]] = {}
    for secret in seen["objects"]["secrets"]:
        by_role.setdefault(secret["metadata"]["labels"][LABEL_ROLE], []).append(secret)
    (own,) = by_role["sandbox"]
    assert own["metadata"]["name"] == object_name(sandbox_id)
    decoded = {key: base64.b64decode(data).decode() for key, data in own["data"].items()}
    assert set(decoded) == {"token", "tls.crt", "tls.key"}  # its runner's own: no credential of the sandbox's
    assert not [f for f in forms if f in json.dumps(own) + json.dumps(decoded)]
    # … nor does the pod refer to any Secret but its own.
    assert object_name(sandbox_id, "proxy") not in json.dumps(pod["spec"])
    # The control: the proxy's Secret, read the same way, does hold it.
    (proxy_secret,) = by_role["proxy"]
    proxy_values = [base64.b64decode(data).decode() for data in proxy_secret["data"].values()]
    assert value in proxy_values

    # Nor did anything reach the controller with the value, masked or not.
    text = output.model_dump_json() + "".join(repr(e) for e in sink.events)
    assert value not in text and "[REDACTED]" not in text
    await asyncio.to_thread(live.assert_removed, sandbox_id)


async def test_a_resume_first_removes_the_jobs_still_running_sandbox(live: Live) -> None:
    """A job's sandbox still runs (as a crashed controller's would) when the job is about to
    resume: ``ensure_gone`` deletes its pod with a grace period, waits until the API has it no
    more, and only then its NetworkPolicy and Secret; nothing of it is left."""
    job = f"j-live-{live.run_id}"
    first = live.sandbox()
    turn = asyncio.create_task(
        first.run(
            request(
                bash_agent("sleep 600", defaults=TurnConfig(max_duration=900_000)),
                EnvironmentSpec(),
                Recorder(),
                job=job,
            )
        )
    )
    selector = f"{LABEL_JOB}={job}"
    try:
        deadline = time.monotonic() + 300
        while True:
            listed = await asyncio.to_thread(
                live.read, live.core.list_namespaced_pod, live.namespace, label_selector=selector
            )
            pods = listed["items"]
            if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
                break
            assert time.monotonic() < deadline and not turn.done(), "the job's sandbox never ran"
            await asyncio.sleep(1)
        sandbox_id = pods[0]["metadata"]["labels"][LABEL_SANDBOX]
        second = live.sandbox()  # the restarted controller's backend
        try:
            await second.ensure_gone(job)
        finally:
            await second.aclose()
        assert await asyncio.to_thread(live.sandbox_objects, sandbox_id) == {}
    finally:
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError, EnvError):
            await turn
        await first.aclose()


async def test_an_in_cluster_service_is_reached_by_name_through_the_proxy(live: Live, server: Server) -> None:
    """Items 3 and 4 on a real cluster: a Service destination is rendered as a selector peer
    (never the pod CIDR) and the proxy resolves the Service's name through the cluster's DNS,
    admitted by the DNS peers of its NetworkPolicy (NodeLocal DNSCache, OpenShift: configure
    ``backends.kubernetes.dns`` as ``airlock doctor`` says). The sandbox reaches the server by
    the Service's in-cluster name via its proxy; directly it reaches nothing."""
    from kubernetes.client.exceptions import ApiException

    from airlock.policy import ClusterService

    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": server.name, "labels": {TEST_LABEL: live.run_id}},
        "spec": {
            "selector": {TEST_LABEL: live.run_id, TEST_ROLE: "server"},
            "ports": [{"port": SERVER_PORT, "targetPort": SERVER_PORT, "protocol": "TCP"}],
        },
    }
    await asyncio.to_thread(live.core.create_namespaced_service, live.namespace, service)
    try:
        target = ClusterService(
            name=server.name, namespace=live.namespace, pods={TEST_LABEL: live.run_id, TEST_ROLE: "server"}
        )
        spec = EnvironmentSpec(
            network=NetworkPolicy(
                default=NetworkAction.DENY, rules=[allow(target.destination(), SERVER_PORT)]
            )
        )
        url = f"http://{server.name}.{live.namespace}.svc.cluster.local:{SERVER_PORT}/by-name"
        agent = bash_agent("uname -n", python(FETCH, url))
        sink = Recorder()
        output = await live.sandbox().run(request(agent, spec, sink))
        assert_completed(output)
        results = sink.results()
        lines = {line.split(" ", 1)[0]: line for line in results["t1"]["stdout"].splitlines()}
        assert lines["via-proxy"].startswith("via-proxy REACHED"), lines
        assert lines["direct"].startswith("direct FAILED"), lines  # no DNS, no route but the proxy
        log = await asyncio.to_thread(live.log, server.name)
        assert "/by-name" in log
        await asyncio.to_thread(live.assert_removed, sandbox_id_of(results["t0"]["stdout"]))
    finally:
        try:
            await asyncio.to_thread(live.core.delete_namespaced_service, server.name, live.namespace)
        except ApiException as e:
            if e.status != 404:
                raise

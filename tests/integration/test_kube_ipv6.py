"""The Kubernetes backend on IPv6 pod IPs, its pods run on Docker (an IPv6-primary pod network).

``DockerPods(ipv6_subnet=...)`` creates a dual-stack Docker network with a ULA subnet made
up by the test (checked against this host's IPv6 routes) and gives every pod its IPv6
address as ``podIP``, as an IPv6-primary dual-stack cluster does. The pods run an image the
test builds from the runner image with this checkout's ``airlock`` package over it (and
removes after), so the proxy bundle and runner are the code under test. Proven here: the
controller reaches the runner at ``[pod IPv6]:50051`` (``connect: pod_ip``); the sandbox
reaches its proxy pod at ``http://[proxy IPv6]:3128``, which binds every family and relays
to a server the test runs on this host's address on that network; the proxy's events name
the sandbox's IPv6 address. Where Docker cannot create an IPv6 network, the test skips with
Docker's answer.
"""

from __future__ import annotations

import io
import ipaddress
import json
import secrets
import socket
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airlock.images import runner_image_tag
from airlock.proxy import EgressEvent
from airlock.sandbox import SandboxRequest
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._names import LABEL_ROLE
from airlock.testing import DockerPods, KubeApiStandIn, bash_agent
from airlock.turn import ToolFinished
from layer0 import EnvironmentSpec, ExitReason, NetworkAction, NetworkPolicy, NetworkRule, TurnInput
from tests.support.ipv6 import ipv6_loopback_missing
from tests.support.kube import recorded_guard

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

NS = "airlock-sandboxes"
SITE_PACKAGES = "/opt/venv/lib/python3.11/site-packages"
CHECKOUT = Path(__file__).parents[2] / "airlock"


def host_ipv6_routes() -> list[ipaddress.IPv6Network]:
    """This host's IPv6 routes (``/proc/net/ipv6_route``: destination and prefix length in hex)."""
    routes = []
    for line in Path("/proc/net/ipv6_route").read_text().splitlines():
        dest, length = line.split()[:2]
        address = ipaddress.IPv6Address(bytes.fromhex(dest))
        routes.append(ipaddress.IPv6Network((address, int(length, 16)), strict=False))
    return routes


def free_ula_subnet() -> ipaddress.IPv6Network:
    """A random ULA ``/64`` (``fdXX:XXXX:XXXX:1::/64``) that overlaps none of this host's
    specific routes (the default route ``::/0`` aside)."""
    taken = [r for r in host_ipv6_routes() if r.prefixlen > 0]
    for _ in range(20):
        subnet = ipaddress.IPv6Network(_ula())
        if not any(subnet.overlaps(r) for r in taken):
            return subnet
    raise AssertionError("no free ULA subnet in 20 tries")


def _ula() -> str:
    g = secrets.token_hex(5)  # the 40-bit global id of RFC 4193
    return f"fd{g[:2]}:{g[2:6]}:{g[6:10]}:1::/64"


def overlay_image(client: Any, base: str) -> str:
    """``base`` with this checkout's ``airlock`` package over its own (a tag of the test's)."""
    tag = f"airlock-runner-ipv6-test:{secrets.token_hex(4)}"
    dockerfile = (
        f"FROM {base}\nUSER root\n"
        f"RUN rm -rf {SITE_PACKAGES}/airlock\n"
        f"COPY airlock {SITE_PACKAGES}/airlock\n"
        "USER 65534:65534\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(CHECKOUT, arcname="airlock", filter=lambda t: None if "__pycache__" in t.name else t)
    buffer.seek(0)
    client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True, forcerm=True)
    return tag


class Site:
    """An HTTP server the test runs on this host's address on the pod network."""

    def __init__(self, host: str) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                body = b"hello over IPv6"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6
            daemon_threads = True

            def server_bind(self) -> None:
                # The bridge's address stays "tentative" (duplicate address detection) until
                # a pod joins it: bind it before it is usable (Linux IP_FREEBIND).
                self.socket.setsockopt(socket.SOL_IP, getattr(socket, "IP_FREEBIND", 15), 1)
                super().server_bind()

        self.server = Server((host, 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def image(docker_client: Any) -> Iterator[str]:
    base = runner_image_tag()
    if not docker_client.images.list(name=base):
        pytest.fail(f"the runner image {base} is not built (airlock images build)")
    tag = overlay_image(docker_client, base)
    yield tag
    docker_client.images.remove(tag, force=True)


@pytest.fixture
def v6_pods(docker_client: Any, image: str) -> Iterator[tuple[DockerPods, ipaddress.IPv6Network]]:
    import docker

    if (why := ipv6_loopback_missing()) is not None:
        pytest.skip(why)
    subnet = free_ula_subnet()
    try:
        pods = DockerPods(client=docker_client, ipv6_subnet=str(subnet))
    except docker.errors.APIError as e:
        pytest.skip(f"this Docker engine cannot create an IPv6 network ({subnet}): {e.explanation or e}")
    try:
        yield pods, subnet
    finally:
        pods.close()


async def test_a_proxied_job_runs_on_ipv6_pod_ips(
    v6_pods: tuple[DockerPods, ipaddress.IPv6Network], image: str, tmp_path: Path
) -> None:
    pods, subnet = v6_pods
    gateway = str(subnet[1])  # this host on the pod network
    site = Site(gateway)
    seen: list[Any] = []

    async def sink(event: Any) -> None:
        seen.append(event)

    fetch = (
        'python -c "import urllib.request as u; '
        f"print(u.urlopen('http://[{gateway}]:{site.port}/through-the-proxy', timeout=20).read().decode())\""
    )
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination=f"{gateway}/128", port=site.port, action=NetworkAction.ALLOW)],
        )
    )
    try:
        with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
            settings = KubernetesSettings(
                namespace=NS,
                kubeconfig=str(api.write_kubeconfig(tmp_path / "kubeconfig")),
                connect="pod_ip",
                image=image,
                image_pull_policy="Never",
                start_timeout=90.0,
                # The runner's fence tries the pod's own loopback: nothing leaves the machine.
                enforcement={"metadata_address": "127.0.0.1:9"},
            )
            created: list[dict[str, Any]] = []

            def record(event: Any) -> None:
                created.extend(p for p in api.objects("pods", NS) if p not in created)

            async def both(event: Any) -> None:
                record(event)
                await sink(event)

            request = SandboxRequest.compile(bash_agent(fetch), TurnInput.new("go"), spec, events=both)
            guard = recorded_guard(NS)  # Docker enforces no NetworkPolicy: a recorded proof
            sandbox = KubernetesBackend(settings=settings, sweep=False, turn_timeout=120.0, guard=guard)
            output = await sandbox.run(request)
    finally:
        site.close()
    assert output.exit_reason == ExitReason.complete(), output
    [tool] = [json.loads(e.output) for e in seen if isinstance(e, ToolFinished)]
    assert tool["stdout"].strip() == "hello over IPv6", (
        tool,
        [e for e in seen if isinstance(e, EgressEvent)],
    )
    assert site.paths == ["/through-the-proxy"]
    by_role = {p["metadata"]["labels"][LABEL_ROLE]: p for p in created}
    env = {e["name"]: e.get("value") for e in by_role["sandbox"]["spec"]["containers"][0]["env"]}
    proxy_url = env["HTTP_PROXY"]
    assert proxy_url.startswith("http://[") and ipaddress.ip_address(proxy_url[8:].split("]")[0]) in subnet
    [decision] = [e for e in seen if isinstance(e, EgressEvent) and e.phase == "decision"]
    assert decision.allowed and decision.host == gateway
    client_ip = ipaddress.ip_address(decision.client.rsplit(":", 1)[0].strip("[]"))
    assert client_ip in subnet  # the sandbox reached its proxy over IPv6

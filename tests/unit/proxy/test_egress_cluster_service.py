"""The egress proxy and an in-cluster Service rule, over loopback: the Service's short name is
resolved as its full absolute name and reached on its port; another private name is refused
unresolved. The cluster addresses are stand-ins the test routes to its own loopback server."""

from __future__ import annotations

from airlock.policy import ClusterService
from airlock.proxy import EgressProxy, MemorySink

from .proxy_servers import RecordingServer
from .test_egress_proxy import FakeNet, client, plan

CLUSTER_IP = "10.96.12.7"  # a stand-in: routed to the loopback test server, never contacted
OTHER_IP = "10.96.12.8"
FULL = "search.tools.svc.cluster.local."


async def test_a_service_is_reached_by_its_name_and_nothing_else_private(
    http_server: RecordingServer, other_server: RecordingServer
) -> None:
    net = FakeNet(
        {FULL: [[CLUSTER_IP]], "other.tools.svc.cluster.local": [[OTHER_IP]]},
        {(CLUSTER_IP, 8080): http_server.port, (OTHER_IP, 8080): other_server.port},
    )
    service = ClusterService(name="search", namespace="tools", pods={"app": "search"})
    sink = MemorySink()
    async with (
        EgressProxy(
            plan((service.destination(), 8080, "allow")), sink, resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy) as c,
    ):
        ok = await c.get("http://search.tools:8080/q")
        other = await c.get("http://other.tools.svc.cluster.local:8080/")
        by_ip = await c.get(f"http://{OTHER_IP}:8080/")
        wrong_port = await c.get("http://search.tools:9090/")
    assert ok.status_code == 200 and ok.json()["host"] == "search.tools:8080"
    assert (other.status_code, by_ip.status_code, wrong_port.status_code) == (403, 403, 403)
    assert net.resolved == [FULL]  # the full name, never the search list; nothing else resolved
    assert net.connects == [(CLUSTER_IP, 8080)]
    assert other_server.connections == 0

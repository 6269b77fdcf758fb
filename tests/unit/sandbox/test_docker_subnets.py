"""Small subnets for the internal networks, without Docker: the range's validation, the free
blocks beside what Docker networks, host routes and addresses take, the allocation against a
scripted engine (a creator racing us, a full range that frees up or stays full, a cancel),
the wiring's network create, and the doctor's capacity line."""

from __future__ import annotations

import asyncio
import threading
from ipaddress import IPv4Network
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest
from pydantic import ValidationError

from airlock.policy import ResolvedCredentials
from airlock.policy.plan import compile_plan
from airlock.sandbox.docker import DockerSettings, _subnets
from airlock.sandbox.docker._doctor import _check_subnets
from airlock.sandbox.docker._egress import EgressWiring
from airlock.sandbox.docker._subnets import (
    Claim,
    DockerSubnet,
    allocate,
    capacity,
    conflicts,
    docker_subnets,
    free_runs,
    host_networks,
    parse_local_addresses,
    parse_range,
    parse_routes,
    pick,
)
from layer0 import EnvError, EnvironmentSpec, NetworkAction, NetworkPolicy, NetworkRule


@pytest.fixture(autouse=True)
def no_host_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    """This host's own routes and addresses stay out of the scripted engine's ranges."""
    monkeypatch.setattr(_subnets, "host_networks", lambda: [])


def net(text: str) -> IPv4Network:
    return IPv4Network(text)


POOL = net("10.213.0.0/16")
OVERLAPS = "Pool overlaps with other one on this address space"

# -- the range ----------------------------------------------------------------------------


def test_a_range_is_a_private_ipv4_network() -> None:
    assert parse_range(" 10.213.0.0/16 ") == POOL
    assert parse_range("192.168.64.0/20") == net("192.168.64.0/20")
    for bad, why in (
        ("8.8.0.0/16", "is not private"),
        ("10.213.0.1/16", "host bits set"),
        ("fd00::/8", "IPv4"),
        ("169.254.0.0/16", "is not private"),
        ("127.0.0.0/8", "is not private"),
        ("10.213.0.0/33", "CIDR"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_range(bad)


def test_settings_default_and_bounds() -> None:
    s = DockerSettings()
    assert (s.internal_range, s.internal_prefix, s.internal_subnet_wait) == (POOL, 28, 30.0)
    assert DockerSettings(internal_subnets="10.0.0.0/24", internal_prefix=29).internal_prefix == 29
    assert DockerSettings(internal_subnets="10.0.0.0/28", internal_prefix=28).internal_prefix == 28
    for kw, field, words in (
        ({"internal_prefix": 30}, "internal_prefix", "between 16"),
        ({"internal_subnets": "10.0.0.0/24", "internal_prefix": 20}, "internal_prefix", "between 24"),
        ({"internal_subnets": "10.0.0.0/32", "internal_prefix": 29}, "internal_prefix", "between 32"),
        ({"internal_subnets": "100.64.0.0/16"}, "internal_subnets", "not private"),
        ({"internal_subnet_wait": -1}, "internal_subnet_wait", "greater than or equal"),
    ):
        with pytest.raises(ValidationError) as info:
            DockerSettings(**kw)
        (error,) = info.value.errors()
        assert error["loc"] == (field,) and words in error["msg"], error


# -- the arithmetic -----------------------------------------------------------------------


def test_an_empty_range_is_all_free() -> None:
    assert capacity(POOL, 28, []).free == capacity(POOL, 28, []).total == 4096
    assert pick(POOL, 28, []) == net("10.213.0.0/28")
    assert pick(POOL, 28, [], index=1) == net("10.213.0.16/28")
    assert pick(POOL, 28, [], index=4096) == net("10.213.0.0/28")  # modulo the free count


def test_what_overlaps_a_block_takes_the_whole_block() -> None:
    used = [
        net("10.213.0.4/30"),  # inside the first /28
        net("10.213.0.32/27"),  # the third and fourth /28s
        net("10.213.1.0/24"),  # 16 of them
        net("10.213.255.255/32"),  # the last one
        net("172.17.0.0/16"),  # outside: ignored
    ]
    cap = capacity(POOL, 28, used)
    assert (cap.total, cap.in_use, cap.free) == (4096, 1 + 2 + 16 + 1, 4096 - 20)
    assert pick(POOL, 28, used) == net("10.213.0.16/28")
    runs = free_runs(POOL, 28, used)
    assert runs[:2] == [
        (int(net("10.213.0.16/28").network_address), 1),
        (int(net("10.213.0.64/28").network_address), 12),
    ]
    assert pick(POOL, 28, used, index=1) == net("10.213.0.64/28")
    assert pick(POOL, 28, used, index=13) == net("10.213.2.0/28")  # past the /24


def test_a_network_wider_than_the_range_takes_it_all() -> None:
    assert pick(POOL, 28, [net("10.0.0.0/8")]) is None
    assert capacity(POOL, 28, [net("10.0.0.0/8")]).in_use == 4096


def test_every_block_is_handed_out_once() -> None:
    pool, used = net("10.9.0.0/24"), list[IPv4Network]()
    while (found := pick(pool, 28, used, index=len(used) * 7)) is not None:
        assert not any(found.overlaps(u) for u in used)
        used.append(found)
    assert sorted(used) == list(pool.subnets(new_prefix=28))


# -- the host -----------------------------------------------------------------------------

ROUTES = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
eth1\t0004D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
garbage
"""
FIB = """\
Main:
  +-- 0.0.0.0/0 3 0 4
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
           |-- 172.17.0.1
              /32 host LOCAL
           |-- 10.213.9.9
              /32 host LOCAL
Local:
           |-- 10.213.9.9
              /32 host LOCAL
"""


def test_routes_but_the_default_one() -> None:
    claims = parse_routes(ROUTES)
    assert [c.network for c in claims] == [
        net("172.17.0.0/16"),
        net("10.213.4.0/24"),
        net("192.0.2.0/24"),
    ]
    assert claims[1].what == "host route 10.213.4.0/24 dev eth1"


def test_local_addresses_once_each() -> None:
    claims = parse_local_addresses(FIB)
    assert [c.network for c in claims] == [net("127.0.0.1/32"), net("172.17.0.1/32"), net("10.213.9.9/32")]
    assert claims[2].what == "host address 10.213.9.9"


def test_host_networks_reads_what_it_can(tmp_path: Path) -> None:
    (tmp_path / "route").write_text(ROUTES)
    found = host_networks(tmp_path / "route", tmp_path / "missing")
    assert [c.network for c in found] == [c.network for c in parse_routes(ROUTES)]


def test_conflicts_leave_out_sandboxes_and_dockers_own_bridges() -> None:
    subnets = [
        DockerSubnet("bridge", net("172.17.0.0/16"), ours=False),
        DockerSubnet("airlock-sb-1", net("10.213.0.0/28"), ours=True),
        DockerSubnet("lab", net("10.213.128.0/20"), ours=False),
    ]
    host = [*parse_routes(ROUTES), *parse_local_addresses(FIB)]
    found = [c.what for c in conflicts(POOL, subnets, host)]
    assert found == [
        "Docker network lab (10.213.128.0/20)",
        "host route 10.213.4.0/24 dev eth1",
        "host address 10.213.9.9",
    ]
    assert conflicts(net("10.214.0.0/16"), subnets, host) == []


# -- a scripted engine --------------------------------------------------------------------


class Net:
    def __init__(self, name: str, subnet: str | None, labels: dict[str, str] | None = None) -> None:
        self.name = name
        config = [{"Subnet": subnet}] if subnet else []
        self.attrs: dict[str, Any] = {"Name": name, "IPAM": {"Config": config}, "Labels": labels or {}}
        self.removed = False

    def reload(self) -> None:
        pass


class Networks:
    """``client.networks``: list and create; ``taken`` subnets are refused as overlapping once
    (another creator got there first); ``on_list`` runs at each listing."""

    def __init__(self, *nets: Net) -> None:
        self.nets = list(nets)
        self.taken: set[str] = set()
        self.created: list[dict[str, Any]] = []
        self.lists = 0
        self.on_list: Any = None
        self.fail: Exception | None = None
        self.lock = threading.Lock()

    def list(self, names: list[str] | None = None) -> list[Net]:
        with self.lock:
            self.lists += 1
            if self.on_list is not None:
                self.on_list(self)
            return [n for n in self.nets if names is None or n.name in names]

    def create(self, name: str, **kw: Any) -> Net:
        subnet = kw["ipam"]["Config"][0]["Subnet"]
        if self.fail is not None:
            self.nets.append(Net(name, subnet, kw.get("labels")))  # made, then the call failed
            raise self.fail
        if subnet in self.taken:
            self.taken.discard(subnet)
            self.nets.append(Net("someone-else", subnet))
            raise docker.errors.APIError("403 Client Error", explanation=OVERLAPS)
        with self.lock:
            self.created.append({"name": name, **kw})
            n = Net(name, subnet, kw.get("labels"))
            self.nets.append(n)
        return n


class Client:
    def __init__(self, *nets: Net) -> None:
        self.networks = Networks(*nets)
        self.containers = SimpleNamespace(list=lambda **kw: [])


def no_host() -> list[Claim]:
    return []


def make(client: Client) -> Any:
    def create(subnet: IPv4Network) -> Net:
        return client.networks.create("n", ipam={"Config": [{"Subnet": str(subnet)}]})

    return create


def test_docker_subnets_every_network_ipv4_only() -> None:
    client = Client(
        Net("bridge", "172.17.0.0/16"),
        Net("none", None),
        Net("v6", "fd00:1::/64"),
        Net("airlock-sb-1", "10.213.0.0/28", {"airlock.sandbox": "sb-1"}),
    )
    assert docker_subnets(client) == [
        DockerSubnet("bridge", net("172.17.0.0/16"), ours=False),
        DockerSubnet("airlock-sb-1", net("10.213.0.0/28"), ours=True),
    ]


def test_allocate_skips_what_is_taken_and_retries_after_a_race() -> None:
    pool = net("10.9.0.0/25")  # eight /28s: one a network's, one a route's, five raced
    client = Client(Net("lab", "10.9.0.0/28"))
    client.networks.taken = {str(s) for s in pool.subnets(new_prefix=28)} - {"10.9.0.112/28"}
    host = [Claim(net("10.9.0.16/28"), "host route")]
    created, subnet = allocate(client, pool, 28, make(client), wait=0, what="t", host=lambda: host)
    assert subnet == net("10.9.0.112/28")
    assert created.attrs["IPAM"]["Config"] == [{"Subnet": str(subnet)}]
    assert len(client.networks.created) == 1


def test_allocate_fails_at_once_when_full_and_not_waiting() -> None:
    client = Client(Net("a", "10.9.0.0/28"), Net("b", "10.9.0.16/28"))
    with pytest.raises(EnvError) as info:
        allocate(
            client,
            net("10.9.0.0/27"),
            28,
            make(client),
            wait=0,
            what="internal network of sb-x",
            host=no_host,
        )
    assert info.value.kind == "provision_failed"
    assert str(info.value.message) == (
        "internal network of sb-x: no free /28 left in 10.9.0.0/27 (2 in use); "
        "raise backends.docker.internal_subnets or lower concurrency"
    )
    assert client.networks.created == []


def test_allocate_waits_until_one_is_freed() -> None:
    client = Client(Net("a", "10.9.0.0/28"), Net("b", "10.9.0.16/28"))

    def free_later(networks: Networks) -> None:
        if networks.lists == 4:
            networks.nets.pop(0)

    client.networks.on_list = free_later
    _, subnet = allocate(
        client, net("10.9.0.0/27"), 28, make(client), wait=60, poll=0.001, what="t", host=no_host
    )
    assert subnet == net("10.9.0.0/28") and client.networks.lists == 4


def test_allocate_gives_up_after_the_wait_saying_so() -> None:
    client = Client(Net("a", "10.9.0.0/28"))
    with pytest.raises(EnvError, match=r"\(1 in use\) after waiting 0s"):
        allocate(client, net("10.9.0.0/28"), 28, make(client), wait=0.01, poll=0.001, what="t", host=no_host)
    assert client.networks.lists > 1


def test_a_cancel_ends_the_wait() -> None:
    client = Client(Net("a", "10.9.0.0/28"))
    with pytest.raises(EnvError, match="cancelled while waiting"):
        allocate(
            client,
            net("10.9.0.0/28"),
            28,
            make(client),
            wait=3600,
            what="t",
            cancelled=lambda: True,
            host=no_host,
        )


def test_other_engine_errors_are_not_retried() -> None:
    client = Client()
    client.networks.fail = docker.errors.APIError("500 Server Error", explanation="disk full")
    with pytest.raises(docker.errors.APIError, match="disk full"):
        allocate(client, POOL, 28, make(client), wait=0, what="t", host=no_host)


def test_threads_of_one_process_never_pick_the_same_subnet() -> None:
    client = Client()
    pool = net("10.9.0.0/24")  # 16 /28s for 16 threads: each must get its own
    found: list[IPv4Network] = []

    def one() -> None:
        found.append(allocate(client, pool, 28, make(client), wait=0, what="t", host=no_host)[1])

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(found) == list(pool.subnets(new_prefix=28))


# -- the wiring ---------------------------------------------------------------------------


def wiring(client: Any, tmp_path: Path, settings: DockerSettings | None = None) -> EgressWiring:
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination="10.1.2.3", port=80, action=NetworkAction.ALLOW)],
        )
    )
    return EgressWiring(
        client=client,
        sandbox_id="sb-0123456789ab",
        state_dir=tmp_path,
        labels={"airlock.sandbox": "sb-0123456789ab"},
        user=(1000, 1000),
        root=False,
        image="img",
        plan=compile_plan(spec),
        credentials=ResolvedCredentials({}),
        egress_networks=["airlock-egress"],
        events=None,
        settings=settings,
    )


def test_the_internal_network_gets_its_subnet_as_ipam_config(tmp_path: Path) -> None:
    client = Client(Net("bridge", "172.17.0.0/16"))
    w = wiring(client, tmp_path, DockerSettings(internal_subnets="10.9.0.0/24", internal_prefix=29))
    w.create_network()
    (created,) = client.networks.created
    assert created["name"] == "airlock-sb-0123456789ab" and created["internal"] is True
    assert created["options"] == {"com.docker.network.bridge.inhibit_ipv4": "true"}
    (pool,) = created["ipam"]["Config"]
    assert (
        pool["Subnet"] == w.subnet
        and net(w.subnet).prefixlen == 29
        and net(w.subnet).subnet_of(net("10.9.0.0/24"))
    )
    assert w.network is client.networks.nets[-1]
    assert '"clients":["' + w.subnet + '"]' in w.bundle_config_json()  # the proxy admits only it


def test_a_full_range_creates_nothing(tmp_path: Path) -> None:
    client = Client(Net("other", "10.9.0.0/28"))
    settings = DockerSettings(internal_subnets="10.9.0.0/28", internal_prefix=28, internal_subnet_wait=0)
    w = wiring(client, tmp_path, settings)
    with pytest.raises(
        EnvError, match=r"sandbox sb-0123456789ab: no free /28 left in 10\.9\.0\.0/28 \(1 in use\)"
    ):
        w.create_network()
    assert w.network is None and client.networks.created == []
    assert w.remove() == []


async def test_cancelling_the_run_ends_the_wait(tmp_path: Path) -> None:
    """The wait runs in a thread of a shielded provisioning step; cancelling the task that
    made the wiring (the run) ends it at the next poll, having created nothing."""
    client = Client(Net("other", "10.9.0.0/28"))
    settings = DockerSettings(internal_subnets="10.9.0.0/28", internal_subnet_wait=3600)
    inflight: list[asyncio.Future[None]] = []

    async def run() -> None:
        w = wiring(client, tmp_path, settings)
        inflight.append(asyncio.ensure_future(asyncio.to_thread(w.create_network)))
        await asyncio.shield(inflight[0])

    waiting = threading.Event()

    def listed(networks: Networks) -> None:
        if networks.lists >= 2:
            waiting.set()

    client.networks.on_list = listed
    task = asyncio.ensure_future(run())
    await asyncio.to_thread(waiting.wait)  # listed twice: it is waiting
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(EnvError, match="cancelled while waiting for a free internal subnet"):
        await inflight[0]
    assert client.networks.created == []


def test_a_create_that_failed_late_is_still_removed(tmp_path: Path) -> None:
    client = Client()
    client.networks.fail = docker.errors.DockerException("read timed out")
    w = wiring(client, tmp_path, DockerSettings(internal_subnets="10.9.0.0/24"))
    with pytest.raises(docker.errors.DockerException):
        w.create_network()
    assert w.network is client.networks.nets[-1]  # found by name: teardown removes it


# -- the doctor ---------------------------------------------------------------------------


def test_doctor_counts_the_range() -> None:
    client = Client(
        Net("bridge", "172.17.0.0/16"),
        Net("airlock-sb-1", "10.213.0.0/28", {"airlock.sandbox": "sb-1"}),
        Net("airlock-sb-2", "10.213.0.16/28", {"airlock.sandbox": "sb-2"}),
    )
    check = _check_subnets(client, DockerSettings(), host=parse_routes(ROUTES)[:1])
    assert check.status == "ok", check
    assert check.message == (
        "internal networks: /28 subnets of 10.213.0.0/16 (backends.docker.internal_subnets): "
        "4096 in all, 2 in use (2 by sandboxes), 4094 free"
    )


def test_doctor_warns_of_an_overlapping_route_or_network() -> None:
    client = Client(Net("lab", "10.213.128.0/20"))
    check = _check_subnets(client, DockerSettings(), host=parse_routes(ROUTES))
    assert check.status == "warning"
    assert "4096 in all, 272 in use (0 by sandboxes), 3824 free" in check.message
    assert "overlaps Docker network lab (10.213.128.0/20), host route 10.213.4.0/24 dev eth1" in check.message
    assert "internal_subnets" in (check.hint or "")


def test_doctor_warns_when_full() -> None:
    client = Client(Net("airlock-sb-1", "10.9.0.0/28", {"airlock.sandbox": "sb-1"}))
    settings = DockerSettings(internal_subnets="10.9.0.0/28")
    check = _check_subnets(client, settings, host=[])
    assert check.status == "warning" and "0 free" in check.message and "waits" in check.message


def test_doctor_without_a_listing_is_an_error() -> None:
    def refuse() -> list[Net]:
        raise docker.errors.DockerException("connection refused")

    broken = SimpleNamespace(networks=SimpleNamespace(list=refuse))
    check = _check_subnets(broken, DockerSettings(), host=[])
    assert check.status == "error" and "connection refused" in check.message

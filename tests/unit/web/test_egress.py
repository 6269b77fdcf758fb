"""``/api/v1/jobs/{id}/egress``: a job's decisions with destination, rule and bytes; a denied
one carries the allow rule that would permit it (parsed back, it names that destination);
another tenant's job is a 404; without a credential, 401."""

from __future__ import annotations

from pathlib import Path

import yaml

from airlock.jobs import SandboxActivity
from airlock.proxy import EgressEvent

from .world import world


def egress(phase: str, host: str, allowed: bool, **extra: object) -> SandboxActivity:
    rule = "allow api.example.com:443 (spec.network.rules[0])" if allowed else "default deny"
    event = EgressEvent(
        phase=phase,  # type: ignore[arg-type]
        client="10.0.0.2:40000",
        method="CONNECT",
        host=host,
        port=443,
        allowed=allowed,
        rule=rule,
        reason="",
        **extra,  # type: ignore[arg-type]
    )
    return SandboxActivity(event=event)


async def test_the_ledger_lists_decisions_with_bytes_and_a_rule_for_each_denial(tmp_path: Path) -> None:
    async with world(tmp_path) as w, w.client("alice") as alice, w.client("bob") as bob:
        await w.store.append(w.red.id, egress("decision", "api.example.com", True))
        await w.store.append(w.red.id, egress("decision", "evil.example", False))
        closed = egress("closed", "api.example.com", True, bytes_up=120, bytes_down=4096, duration_ms=7)
        await w.store.append(w.red.id, closed)
        answer = await alice.get(f"/api/v1/jobs/{w.red.id}/egress")
        assert answer.status_code == 200, answer.text
        allowed, denied = answer.json()["decisions"]
        assert (allowed["host"], allowed["allowed"], allowed["bytes_down"]) == ("api.example.com", True, 4096)
        assert allowed["suggested_rule"] is None
        assert (denied["host"], denied["allowed"], denied["rule"]) == ("evil.example", False, "default deny")
        rule = yaml.safe_load(denied["suggested_rule"])
        assert rule == {"network": {"allow": [{"destination": "evil.example", "port": 443}]}}
        assert (await bob.get(f"/api/v1/jobs/{w.red.id}/egress")).status_code == 404
        async with w.client() as anonymous:
            assert (await anonymous.get(f"/api/v1/jobs/{w.red.id}/egress")).status_code == 401

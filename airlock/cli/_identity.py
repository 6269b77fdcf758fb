"""Who may do what, from the command line: ``airlock whoami``, ``airlock keys create / ls /
revoke`` (administrators), ``airlock tenants`` (use against quotas) and ``airlock audit`` (the
log of state-changing calls)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime

from rich.markup import escape
from rich.table import Table

from airlock.identity import ApiKeyRecord

from ._common import console, err_console
from ._jobs import Target, _with_client


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _record(key: ApiKeyRecord) -> dict[str, object]:
    """A key's record as JSON values (times in ISO 8601)."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(key).items()}


def whoami(target: Target, as_json: bool) -> None:
    """Print the principal the credential authenticates as."""

    me = _with_client(target, as_json, lambda c: c.whoami())
    if as_json:
        print(me.model_dump_json())
        return
    console.print(f"{escape(me.name)} (tenant {escape(me.tenant)}, by {me.method})", highlight=False)
    for permission, agents in me.grants:
        console.print(f"  {permission}  agents {', '.join(agents)}", highlight=False)


def create_key(
    target: Target, name: str, tenant: str, roles: Sequence[str], ttl_s: float | None, as_json: bool
) -> None:
    """Create a key; print its secret once (stdout), and how to use it (stderr)."""
    key, secret = _with_client(target, as_json, lambda c: c.create_key(name, tenant, roles, ttl_s))
    if as_json:
        print(json.dumps({"key": _record(key), "secret": secret}))
        return
    print(secret)
    err_console.print(
        f"key {escape(key.id)} for {escape(key.name)} (tenant {escape(key.tenant)}, roles "
        f"{escape(', '.join(key.roles))}), expires {_when(key.expires_at)}. The secret above is "
        "shown only now: send it as AIRLOCK_TOKEN.",
        highlight=False,
    )


def list_keys(target: Target, tenant: str | None, include_revoked: bool, as_json: bool) -> None:
    """Print the API keys as a table (never their secrets)."""
    keys = _with_client(target, as_json, lambda c: c.keys(tenant, include_revoked))
    if as_json:
        print(json.dumps([_record(k) for k in keys]))
        return
    table = Table("id", "name", "tenant", "roles", "created", "expires", "last used", "revoked")
    for k in keys:
        table.add_row(
            k.id,
            escape(k.name),
            escape(k.tenant),
            escape(", ".join(k.roles)),
            _when(k.created_at),
            _when(k.expires_at),
            _when(k.last_used),
            _when(k.revoked_at),
        )
    console.print(table)


def revoke_key(target: Target, key_id: str, as_json: bool) -> None:
    """Revoke a key; its next call is refused."""
    key: ApiKeyRecord = _with_client(target, as_json, lambda c: c.revoke_key(key_id))
    if as_json:
        print(json.dumps(_record(key)))
        return
    console.print(f"revoked key {escape(key.id)} of {escape(key.name)}", highlight=False)


def tenants(target: Target, as_json: bool) -> None:
    """Print each visible tenant's use against its quotas."""
    found = _with_client(target, as_json, lambda c: c.tenants())
    if as_json:
        print(json.dumps([t.model_dump(mode="json") for t in found]))
        return
    table = Table("tenant", "quota", "used", "limit")
    for tenant in found:
        for q in tenant.quotas:
            table.add_row(escape(tenant.tenant), q.quota, q.used, q.limit or "unlimited")
    console.print(table)


def audit(
    target: Target,
    *,
    tenant: str | None,
    principal: str | None,
    action: str | None,
    since: datetime | None,
    limit: int,
    as_json: bool,
) -> None:
    """Print audit entries, newest first."""
    entries = _with_client(
        target,
        as_json,
        lambda c: c.audit(tenant=tenant, principal=principal, action=action, since=since, limit=limit),
    )
    if as_json:
        print(json.dumps([e.model_dump(mode="json") for e in entries]))
        return
    table = Table("time", "principal", "tenant", "action", "target", "outcome", "peer", "detail")
    for e in entries:
        colour = "green" if e.outcome == "OK" else "red"
        table.add_row(
            _when(e.time),
            escape(e.principal),
            escape(e.tenant),
            e.action,
            escape(e.target),
            f"[{colour}]{e.outcome}[/]",
            escape(e.peer),
            escape(e.detail),
        )
    console.print(table)

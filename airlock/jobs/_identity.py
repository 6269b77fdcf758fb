"""The identity side of the jobs API as the client reads it: who am I, API keys (as the key
store's records), tenants' use against their quotas, audit entries (from their wire form)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.identity import ApiKeyRecord

from .convert import timestamp_from_proto

_METHODS = {
    cpb.AUTH_METHOD_BOOTSTRAP: "bootstrap",
    cpb.AUTH_METHOD_API_KEY: "key",
    cpb.AUTH_METHOD_OIDC: "oidc",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class CallerInfo(_Frozen):
    """The principal a credential authenticates as, and what its roles grant."""

    name: str
    tenant: str
    roles: tuple[str, ...]
    method: str
    #: (permission, agent globs) per grant.
    grants: tuple[tuple[str, tuple[str, ...]], ...]


class QuotaUse(_Frozen):
    """One quota of a tenant: its limit (None: unlimited) and use, as text."""

    quota: str
    limit: str | None
    used: str


class TenantUse(_Frozen):
    """A tenant's use against its quotas."""

    tenant: str
    quotas: tuple[QuotaUse, ...]


class AuditRecord(_Frozen):
    """One state-changing call: who, when, from where, on what, how it ended."""

    seq: int
    time: datetime
    principal: str
    tenant: str
    action: str
    target: str
    peer: str
    outcome: str
    detail: str


def caller_from_proto(message: cpb.WhoAmIResponse) -> CallerInfo:
    """A WhoAmI answer."""
    return CallerInfo(
        name=message.name,
        tenant=message.tenant,
        roles=tuple(message.roles),
        method=_METHODS.get(message.method, "unknown"),
        grants=tuple((g.permission, tuple(g.agents)) for g in message.grants),
    )


def key_from_proto(message: cpb.ApiKey) -> ApiKeyRecord:
    """An API key's record."""

    return ApiKeyRecord(
        id=message.id,
        name=message.name,
        tenant=message.tenant,
        roles=tuple(message.roles),
        created_at=timestamp_from_proto(message.created_at),
        created_by=message.created_by,
        revoked_by=message.revoked_by or None,
        expires_at=timestamp_from_proto(message.expires_at) if message.HasField("expires_at") else None,
        last_used=timestamp_from_proto(message.last_used) if message.HasField("last_used") else None,
        revoked_at=timestamp_from_proto(message.revoked_at) if message.HasField("revoked_at") else None,
    )


def tenant_from_proto(message: cpb.TenantUsage) -> TenantUse:
    """A tenant's use against its quotas."""
    quotas = tuple(
        QuotaUse(quota=q.quota, limit=q.limit if q.HasField("limit") else None, used=q.used)
        for q in message.quotas
    )
    return TenantUse(tenant=message.tenant, quotas=quotas)


def audit_from_proto(message: cpb.AuditEntry) -> AuditRecord:
    """An audit entry."""
    return AuditRecord(
        seq=message.seq,
        time=timestamp_from_proto(message.time),
        principal=message.principal,
        tenant=message.tenant,
        action=message.action,
        target=message.target,
        peer=message.peer,
        outcome=message.outcome,
        detail=message.detail,
    )

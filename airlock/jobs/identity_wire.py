"""The identity side of the jobs API and its wire form, both ways (the server writes it, the
client reads it): who am I, API keys (the key store's records), tenants' use against their
quotas, audit entries."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.identity import ApiKeyRecord, Principal

from .convert import timestamp_from_proto, timestamp_to_proto

#: How a principal authenticated, on the wire.
_METHODS: dict[str, cpb.AuthMethod.ValueType] = {
    "bootstrap": cpb.AUTH_METHOD_BOOTSTRAP,
    "key": cpb.AUTH_METHOD_API_KEY,
    "oidc": cpb.AUTH_METHOD_OIDC,
}
_METHOD_NAMES = {value: name for name, value in _METHODS.items()}


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
    """One state-changing call: who, when, from where, on what, how it ended (``outcome``:
    ``OK`` or the status code it was refused with). ``seq`` is the log's, once written."""

    seq: int = 0
    time: datetime
    principal: str
    #: The tenant whose thing it acted on.
    tenant: str
    #: The RPC ("SubmitJob", …), or ``QuotasChanged``.
    action: str
    #: The job, key or workflow it acted on (empty: none yet, e.g. a refused submit).
    target: str = ""
    #: The caller's address as the server saw it.
    peer: str = ""
    outcome: str
    detail: str = ""


def caller_to_proto(principal: Principal) -> cpb.WhoAmIResponse:
    """A principal as WhoAmI answers it."""
    return cpb.WhoAmIResponse(
        name=principal.name,
        tenant=principal.tenant,
        roles=list(principal.roles),
        method=_METHODS[principal.method],
        grants=[
            cpb.PermissionGrant(permission=g.permission, agents=list(g.agents)) for g in principal.grants
        ],
    )


def caller_from_proto(message: cpb.WhoAmIResponse) -> CallerInfo:
    """A WhoAmI answer."""
    return CallerInfo(
        name=message.name,
        tenant=message.tenant,
        roles=tuple(message.roles),
        method=_METHOD_NAMES.get(message.method, "unknown"),
        grants=tuple((g.permission, tuple(g.agents)) for g in message.grants),
    )


def key_to_proto(key: ApiKeyRecord) -> cpb.ApiKey:
    """An API key's record on the wire (never its secret or hash)."""
    message = cpb.ApiKey(
        id=key.id,
        name=key.name,
        tenant=key.tenant,
        roles=list(key.roles),
        created_at=timestamp_to_proto(key.created_at),
        created_by=key.created_by,
        revoked_by=key.revoked_by or "",
    )
    for name in ("expires_at", "last_used", "revoked_at"):
        value = getattr(key, name)
        if value is not None:
            getattr(message, name).CopyFrom(timestamp_to_proto(value))
    return message


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


def tenant_to_proto(use: TenantUse) -> cpb.TenantUsage:
    """A tenant's use against its quotas on the wire."""
    quotas = [cpb.QuotaUse(quota=q.quota, limit=q.limit, used=q.used) for q in use.quotas]
    return cpb.TenantUsage(tenant=use.tenant, quotas=quotas)


def tenant_from_proto(message: cpb.TenantUsage) -> TenantUse:
    """A tenant's use against its quotas."""
    quotas = tuple(
        QuotaUse(quota=q.quota, limit=q.limit if q.HasField("limit") else None, used=q.used)
        for q in message.quotas
    )
    return TenantUse(tenant=message.tenant, quotas=quotas)


def audit_to_proto(entry: AuditRecord) -> cpb.AuditEntry:
    """One audit entry on the wire."""
    return cpb.AuditEntry(
        seq=entry.seq,
        time=timestamp_to_proto(entry.time),
        principal=entry.principal,
        tenant=entry.tenant,
        action=entry.action,
        target=entry.target,
        peer=entry.peer,
        outcome=entry.outcome,
        detail=entry.detail,
    )


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

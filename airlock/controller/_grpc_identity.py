"""The identity and tenancy RPCs: who am I, API keys (administrators), tenants' use against
their quotas, and the audit log."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import grpc

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.identity import AuthSettings, InvalidKeyRequest, KeyNotFound, Permission, Principal, allows
from airlock.jobs import identity_wire as iw
from airlock.jobs import utcnow
from airlock.jobs.convert import timestamp_from_proto

from . import _access as access
from . import _grpc_errors as errors
from ._audit_log import AuditFilter
from ._callers import caller, current_call

if TYPE_CHECKING:
    from airlock.identity import KeyStore

    from ._quotas import Quotas
    from ._store import JobStore


class IdentityApi:
    """The identity RPCs over the key store, the quotas and the job store's audit log."""

    def __init__(self, keys: KeyStore, settings: AuthSettings, quotas: Quotas, store: JobStore) -> None:
        self.keys = keys
        self.settings = settings
        self.quotas = quotas
        self.store = store

    @staticmethod
    def who_am_i() -> cpb.WhoAmIResponse:
        return iw.caller_to_proto(caller())

    async def _admin(self, context: grpc.aio.ServicerContext, what: str) -> Principal:
        """The caller, an administrator (else the call ends: PERMISSION_DENIED)."""
        principal = caller()
        try:
            access.require(principal, Permission.ADMIN, what)
        except access.PermissionDenied as e:
            await errors.refuse(context, e)
        return principal

    async def create_key(
        self, request: cpb.CreateKeyRequest, context: grpc.aio.ServicerContext
    ) -> cpb.CreateKeyResponse:
        principal = await self._admin(context, "create API keys")
        call = current_call()
        call.tenant, call.detail = request.tenant, f"key for {request.name} roles {','.join(request.roles)}"
        problems = errors.required(request, "name", "tenant")
        if not request.roles:
            problems.append(wire.Problem("roles", "is required (at least one role)"))
        expires = None
        if request.HasField("ttl"):
            ttl = request.ttl.ToTimedelta()
            if ttl <= timedelta(0):
                problems.append(wire.Problem("ttl", "must be positive"))
            expires = utcnow() + ttl
        if problems:
            return await errors.invalid(context, problems)
        try:
            record, secret = await self.keys.create(
                request.name,
                request.tenant,
                list(request.roles),
                created_by=principal.name,
                expires_at=expires,
            )
        except InvalidKeyRequest as e:
            return await errors.invalid(context, [wire.Problem("key", str(e))])
        call.target = record.id
        return cpb.CreateKeyResponse(key=iw.key_to_proto(record), secret=secret)

    async def list_keys(
        self, request: cpb.ListKeysRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListKeysResponse:
        await self._admin(context, "list API keys")
        found = await self.keys.list(tenant=request.tenant or None, include_revoked=request.include_revoked)
        return cpb.ListKeysResponse(keys=[iw.key_to_proto(k) for k in found])

    async def revoke_key(
        self, request: cpb.RevokeKeyRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ApiKey:
        principal = await self._admin(context, "revoke API keys")
        current_call().target = request.id
        problems = errors.required(request, "id")
        if problems:
            return await errors.invalid(context, problems)
        try:
            record = await self.keys.revoke(request.id, by=principal.name)
        except KeyNotFound as e:
            return await errors.fail(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", str(e))
        current_call().tenant = record.tenant
        return iw.key_to_proto(record)

    async def list_tenants(
        self, request: cpb.ListTenantsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListTenantsResponse:
        principal = caller()
        names = self.settings.tenant_names() if principal.is_admin else [principal.tenant]
        tenants = [iw.tenant_to_proto(await self.quotas.tenant_use(name)) for name in names]
        return cpb.ListTenantsResponse(tenants=tenants)

    async def list_audit(
        self, request: cpb.ListAuditRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListAuditResponse:
        principal = caller()
        tenant = request.tenant or None
        if not principal.is_admin:
            if not allows(principal, Permission.READ):
                await errors.refuse(context, access.denied(principal, Permission.READ, "read the audit log"))
            if tenant is not None and tenant != principal.tenant:
                await errors.refuse(
                    context, access.denied(principal, Permission.ADMIN, f"read tenant {tenant!r}'s audit log")
                )
            tenant = principal.tenant
        before = None
        if request.page_token:
            try:
                before = int(request.page_token)
            except ValueError:
                return await errors.invalid(
                    context, [wire.Problem("page_token", "is not a token of ListAudit")]
                )
        where = AuditFilter(
            tenant=tenant,
            principal=request.principal or None,
            action=request.action or None,
            since=timestamp_from_proto(request.since) if request.HasField("since") else None,
            before_seq=before,
            limit=min(request.page_size or 100, 1000),
        )
        entries = await self.store.audit(where)
        token = str(entries[-1].seq) if len(entries) == where.limit else ""
        return cpb.ListAuditResponse(entries=[iw.audit_to_proto(e) for e in entries], next_page_token=token)

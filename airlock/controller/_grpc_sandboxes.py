"""The long-lived sandbox RPCs: create, get, list, pause, resume, remove."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

import grpc

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.errors import ConfigError
from airlock.identity import Permission, allows
from airlock.jobs import SandboxInfo
from airlock.jobs import convert as jc
from layer0 import EnvError

from . import _access as access
from . import _grpc_errors as errors
from ._callers import caller, current_call
from ._sandbox_access import SandboxUse, sandbox_for
from ._workspace_intake import WorkspaceViolation

if TYPE_CHECKING:
    from ._sandboxes import KeptSandboxes

__all__ = ["SandboxApi"]

#: A request naming one sandbox.
IdRequest = (
    cpb.GetSandboxRequest | cpb.PauseSandboxRequest | cpb.ResumeSandboxRequest | cpb.RemoveSandboxRequest
)


class SandboxApi:
    """The sandbox RPCs over the controller's :class:`~._sandboxes.KeptSandboxes`."""

    def __init__(self, sandboxes: KeptSandboxes) -> None:
        self.sandboxes = sandboxes

    async def sandbox(
        self, context: grpc.aio.ServicerContext, sandbox_id: str, use: SandboxUse
    ) -> SandboxInfo:
        """The sandbox the request names, if the caller may ``use`` it (else the call ends:
        NOT_FOUND for another tenant's, PERMISSION_DENIED naming the permission)."""
        call = current_call()
        call.target = sandbox_id
        try:
            info = await sandbox_for(call.principal, sandbox_id, use, self.sandboxes.get)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        call.tenant = info.tenant
        return info

    async def create(
        self, request: cpb.CreateSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        problems = errors.required(request, "agent")
        ttl_s = request.ttl.ToMilliseconds() / 1000 if request.HasField("ttl") else None
        if ttl_s is not None and ttl_s <= 0:
            problems.append(wire.Problem("ttl", "must be positive"))
        if problems:
            return await errors.invalid(context, problems)
        principal = caller()
        current_call().detail = f"agent {request.agent}"
        try:
            access.require(
                principal, Permission.SUBMIT, f"create a sandbox of agent {request.agent!r}", request.agent
            )
            info = await self.sandboxes.create(
                request.agent, ttl_s=ttl_s, tenant=principal.tenant, owner=principal.name
            )
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        except ConfigError as e:
            return await errors.fail(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", str(e))
        except EnvError as e:
            return await errors.fail(context, grpc.StatusCode.UNAVAILABLE, "SANDBOX_REFUSED", str(e))
        current_call().target = info.id
        return jc.sandbox_to_proto(info)

    async def get(self, request: cpb.GetSandboxRequest, context: grpc.aio.ServicerContext) -> cpb.Sandbox:
        await errors.need_id(context, request)
        return jc.sandbox_to_proto(await self.sandbox(context, request.id, "see"))

    async def listed(
        self, request: cpb.ListSandboxesRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListSandboxesResponse:
        principal = caller()
        found = await self.sandboxes.listed(None if principal.is_admin else principal.tenant)
        if not (principal.is_admin or allows(principal, Permission.READ)):
            found = [s for s in found if s.owner == principal.name]
        return cpb.ListSandboxesResponse(sandboxes=[jc.sandbox_to_proto(s) for s in found])

    async def pause(self, request: cpb.PauseSandboxRequest, context: grpc.aio.ServicerContext) -> cpb.Sandbox:
        info = await self._steered(context, request)
        return await self._answer(context, self.sandboxes.pause(info.id, info.tenant))

    async def resume(
        self, request: cpb.ResumeSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        info = await self._steered(context, request)
        return await self._answer(context, self.sandboxes.resume(info.id, info.tenant))

    async def remove(
        self, request: cpb.RemoveSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        info = await self._steered(context, request)
        return await self._answer(context, self.sandboxes.remove(info.id, info.tenant))

    async def _steered(self, context: grpc.aio.ServicerContext, request: IdRequest) -> SandboxInfo:
        await errors.need_id(context, request)
        return await self.sandbox(context, request.id, "steer")

    @staticmethod
    async def _answer(context: grpc.aio.ServicerContext, work: Awaitable[SandboxInfo]) -> cpb.Sandbox:
        try:
            info = await work
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        except (EnvError, WorkspaceViolation) as e:
            return await errors.fail(context, grpc.StatusCode.UNAVAILABLE, "SANDBOX_REFUSED", str(e))
        return jc.sandbox_to_proto(info)

"""Who calls: every Controller RPC is authenticated before its handler runs, the principal is
the call's (:func:`caller`), and each state-changing call is written to the audit log with its
outcome (refusals included). Health checks need no credential."""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from airlock import wire
from airlock.identity import FailureThrottle, KeyStoreError, Principal, Unauthenticated
from airlock.jobs import AuditRecord, utcnow

_log = logging.getLogger("airlock.auth")

#: Checks an ``authorization`` value; raises :class:`Unauthenticated`.
Authenticate = Callable[[str], Awaitable[Principal]]


class CallerCheck(Protocol):
    """What authenticates a call (:class:`airlock.identity.Authenticator`, or a test double)."""

    async def authenticate(self, authorization: str) -> Principal:
        """The principal ``authorization`` (the metadata value) proves; raises
        :class:`~airlock.identity.Unauthenticated`."""
        ...


#: Writes one audit entry.
Record = Callable[[AuditRecord], Awaitable[object]]

#: The RPCs that change state: each call is audited.
AUDITED = frozenset(
    {
        "SubmitJob",
        "CancelJob",
        "ForkJob",
        "CreateSandbox",
        "PauseSandbox",
        "ResumeSandbox",
        "RemoveSandbox",
        "ApproveJob",
        "RejectJob",
        "PauseJob",
        "ResumeJob",
        "StepJob",
        "SignalWorkflow",
        "CreateKey",
        "RevokeKey",
        "PruneJobs",
    }
)


@dataclass
class Call:
    """The current call: its principal, and what the handler notes for the audit log."""

    principal: Principal
    action: str
    peer: str
    target: str = ""
    #: The tenant whose thing it acted on (default: the principal's).
    tenant: str | None = None
    detail: str = ""


_CALL: contextvars.ContextVar[Call] = contextvars.ContextVar("airlock_call")


def current_call() -> Call:
    """The call being served (inside a Controller handler)."""
    return _CALL.get()


def caller() -> Principal:
    """The authenticated principal of the call being served."""
    return _CALL.get().principal


class PrincipalAuth(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Authenticates every call but health checks (``authorization: Bearer <credential>``)
    and audits the Controller's state-changing ones. A failure is ``UNAUTHENTICATED`` with the
    authenticator's reason; the handler never runs."""

    def __init__(
        self,
        authenticate: Authenticate,
        record: Record | None = None,
        throttle: FailureThrottle | None = None,
    ) -> None:
        self._authenticate = authenticate
        self._record = record
        self._throttle = throttle or FailureThrottle()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or details.method.startswith("/grpc.health.v1.Health/"):
            return handler
        action = details.method.rsplit("/", 1)[-1]
        record = self._record if action in AUDITED else None
        return _wrapped(handler, _Gate(action, self._authenticate, record, self._throttle))


@dataclass(frozen=True)
class _Gate:
    action: str
    authenticate: Authenticate
    record: Record | None
    throttle: FailureThrottle

    async def enter(self, context: grpc.aio.ServicerContext) -> contextvars.Token[Call]:
        host = peer_host(context.peer() or "")
        wait = self.throttle.wait(host)
        if wait:
            message = f"too many failed authentications from this address; try again in {math.ceil(wait)} s"
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
            raise AssertionError("context.abort returned") from None  # pragma: no cover
        try:
            principal = await self.authenticate(wire.authorization_value(context.invocation_metadata()))
        except Unauthenticated as e:
            self.throttle.failed(host)
            _log.warning("rejected %s: %s (peer %s)", self.action, e.reason, context.peer())
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.reason)
            raise AssertionError("context.abort returned") from None  # pragma: no cover
        except KeyStoreError as e:
            _log.error("cannot check the credential of a %s call: %s", self.action, e)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "credentials cannot be checked now; try again")
            raise AssertionError("context.abort returned") from None  # pragma: no cover
        return _CALL.set(Call(principal, self.action, context.peer() or ""))

    async def leave(
        self, context: grpc.aio.ServicerContext, token: contextvars.Token[Call], ok: bool
    ) -> None:
        call = _CALL.get()
        _CALL.reset(token)
        if self.record is None:
            return
        code = context.code() if not ok else None
        outcome = "OK" if ok else (code.name if isinstance(code, grpc.StatusCode) else "CANCELLED")
        detail = call.detail or ("" if ok else str(context.details() or ""))
        entry = AuditRecord(
            time=utcnow(),
            principal=call.principal.name,
            tenant=call.tenant or call.principal.tenant,
            action=self.action,
            target=call.target,
            peer=call.peer,
            outcome=outcome,
            detail=detail,
        )
        try:
            await self.record(entry)
        except Exception:
            _log.exception("cannot write the audit entry of %s by %s", self.action, call.principal.name)


def peer_host(peer: str) -> str:
    """The address of a gRPC peer without its port (``ipv4:10.0.0.7:5123`` → ``ipv4:10.0.0.7``)."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer


def _wrapped(handler: grpc.RpcMethodHandler, gate: _Gate) -> grpc.RpcMethodHandler:
    """``handler`` behind ``gate``: authenticated first, audited after (same kind of handler)."""
    kinds = (
        (handler.unary_unary, grpc.unary_unary_rpc_method_handler, False),
        (handler.unary_stream, grpc.unary_stream_rpc_method_handler, True),
        (handler.stream_unary, grpc.stream_unary_rpc_method_handler, False),
        (handler.stream_stream, grpc.stream_stream_rpc_method_handler, True),
    )
    behavior, make, streams = next((b, m, s) for b, m, s in kinds if b is not None)

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        token = await gate.enter(context)
        ok = False
        try:
            response = await behavior(request, context)
            ok = context.code() in (None, grpc.StatusCode.OK)
            return response
        finally:
            await gate.leave(context, token, ok)

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        token = await gate.enter(context)
        ok = False
        try:
            async for item in behavior(request, context):
                yield item
            ok = context.code() in (None, grpc.StatusCode.OK)
        finally:
            await gate.leave(context, token, ok)

    return make(
        stream if streams else unary,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )

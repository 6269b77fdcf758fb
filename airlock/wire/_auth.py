"""BearerAuth: the runner's token check; reading a call's bearer credentials, for it and for
the controller's principals."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable

import grpc

from ._refusing import refusing_handler

_log = logging.getLogger("airlock.auth")


def authorization_value(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """A call's ``authorization`` metadata value (the last one sent; "" without one)."""
    presented = ""
    for key, value in metadata or ():
        if key == "authorization":
            presented = value if isinstance(value, str) else value.decode("latin-1")
    return presented


def bearer_credentials(value: str) -> str | None:
    """The credentials of an ``authorization`` value whose scheme is Bearer (RFC 7235: the
    scheme is case-insensitive and one or more spaces follow it); None for another scheme or
    none given."""
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credentials.lstrip(" ") or None


class BearerAuth(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Requires ``authorization: Bearer <token>`` on every RPC except health checks (the
    scheme matched case-insensitively, ``bearer`` and ``BEARER`` too).

    The token is compared in constant time and never logged; a refusal is
    ``UNAUTHENTICATED`` saying whether the token was missing or wrong. ``token`` is the token,
    or an async function answering the current one (a token file that may be rotated).
    """

    def __init__(self, token: str | Callable[[], Awaitable[str]]) -> None:
        self._token = token

    async def _expected(self) -> bytes:
        current = self._token if isinstance(self._token, str) else await self._token()
        return current.encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if details.method.startswith("/grpc.health.v1.Health/") or handler is None:
            return handler
        presented = authorization_value(details.invocation_metadata)
        credentials = bearer_credentials(presented)
        if credentials is not None and hmac.compare_digest(credentials.encode(), await self._expected()):
            return handler
        reason = "missing" if not presented else "wrong"
        _log.warning("rejected RPC: %s bearer token", reason, extra={"method": details.method})
        message = f"{reason} bearer token: send 'authorization: Bearer <token>' metadata"

        async def deny(context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        return refusing_handler(handler, deny)

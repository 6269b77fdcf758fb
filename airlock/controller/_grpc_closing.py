"""RefuseWhileClosing: once the controller begins to stop, new Controller RPCs are refused
with UNAVAILABLE, reason ``SHUTTING_DOWN`` and ``RetryInfo`` (a restarted or another replica
answers them), instead of reaching a JobService that is going away."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from airlock import wire

from ._grpc_errors import RETRY_AFTER_S

_MESSAGE = "the controller is shutting down: try again shortly"


class RefuseWhileClosing(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses the calls to ``service`` (a fully qualified name) once :meth:`close` was called."""

    def __init__(self, service: str) -> None:
        self._prefix = f"/{service}/"
        self.closing = False

    def close(self) -> None:
        """Refuse every new call from now on."""
        self.closing = True

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if not self.closing or handler is None or not details.method.startswith(self._prefix):
            return handler

        async def refuse(context: grpc.aio.ServicerContext) -> None:
            await wire.abort_with_details(
                context,
                grpc.StatusCode.UNAVAILABLE,
                _MESSAGE,
                reason="SHUTTING_DOWN",
                retry_after_s=RETRY_AFTER_S,
            )

        return wire.refusing_handler(handler, refuse)

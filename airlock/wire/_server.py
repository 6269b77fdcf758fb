"""gRPC server plumbing both airlock services share: corrupt requests and reflection.

grpc.aio answers a request whose bytes do not parse as its message with ``UNKNOWN`` and a
Python exception class in the details. :class:`RejectCorruptRequests` makes that
``INVALID_ARGUMENT`` with a plain sentence (and the typed details: ErrorInfo reason
``INVALID_ARGUMENT``, one violation), for every unary-request method of the server.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2

from ._problems import Problem
from ._reflection import add_reflection_services
from ._status import abort_with_details

_log = logging.getLogger("airlock.wire")

#: The standard health service's name (both servers serve it).
HEALTH_SERVICE_NAME: str = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name


class _Corrupt:
    """Stands in for a request whose bytes did not parse."""

    def __init__(self, error: DecodeError) -> None:
        self.error = error


def _tolerant(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def read(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError as e:
            return _Corrupt(e)

    return read


class RejectCorruptRequests(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Answers a unary request that does not parse as its message with ``INVALID_ARGUMENT``.

    Args:
        trailing_metadata: sent with the refusal (the runner adds ``airlock-reason: invalid``).
    """

    def __init__(self, trailing_metadata: Sequence[tuple[str, str]] = ()) -> None:
        self._trailing = tuple(trailing_metadata)
        #: The tolerant handler made for each handler the server returned (made once per method).
        self._made: dict[grpc.RpcMethodHandler, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        made = self._made.get(handler)
        if made is None:
            made = self._made[handler] = self._tolerant_handler(handler, details.method)
        return made

    def _tolerant_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        behaviour = handler.unary_stream if handler.response_streaming else handler.unary_unary
        if not (inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)):
            return handler
        trailing = self._trailing

        async def refuse(request: _Corrupt, context: grpc.aio.ServicerContext) -> None:
            _log.info("rejected a corrupt request", extra={"method": method, "error": str(request.error)})
            text = (
                f"the request to {method} does not parse as its protobuf message (corrupt bytes, or "
                "a message of another type)"
            )
            await abort_with_details(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                text,
                reason="INVALID_ARGUMENT",
                problems=[Problem("", text)],
                trailing_metadata=trailing,
            )

        deserializer = _tolerant(handler.request_deserializer)
        if not handler.response_streaming:

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, _Corrupt):
                    await refuse(request, context)
                return await behaviour(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=deserializer, response_serializer=handler.response_serializer
            )

        if inspect.isasyncgenfunction(behaviour):

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if isinstance(request, _Corrupt):
                    await refuse(request, context)
                async for response in behaviour(request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=deserializer, response_serializer=handler.response_serializer
            )

        async def writer(request: Any, context: grpc.aio.ServicerContext) -> None:
            # A streaming method that writes with context.write() (e.g. Health.Watch).
            if isinstance(request, _Corrupt):
                await refuse(request, context)
            await behaviour(request, context)

        return grpc.unary_stream_rpc_method_handler(
            writer, request_deserializer=deserializer, response_serializer=handler.response_serializer
        )


def add_reflection(server: grpc.aio.Server, service_name: str) -> None:
    """Serve gRPC server reflection (``grpc.reflection.v1`` and ``v1alpha``) for ``service_name``,
    the health service and reflection itself; airlock's files carry their proto comments."""
    add_reflection_services(server, (service_name, HEALTH_SERVICE_NAME))

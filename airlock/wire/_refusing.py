"""A method handler that refuses every call, shaped like the handler it stands in for."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

#: Ends a call with a refusal (it aborts the call's context).
Refusal = Callable[[grpc.aio.ServicerContext], Awaitable[None]]


def refusing_handler(handler: grpc.RpcMethodHandler, refuse: Refusal) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s kind (unary or streaming, either side) whose every call is
    ended by ``refuse``, for an interceptor that turns a call away."""

    async def refuse_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await refuse(context)

    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await refuse(context)
        yield  # pragma: no cover - the refusal aborts

    if handler.stream_stream:  # e.g. server reflection
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(refuse_unary)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse_unary)

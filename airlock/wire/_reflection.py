"""gRPC server reflection, ``grpc.reflection.v1`` and ``v1alpha``, with the proto comments.

grpcio-reflection serves only ``v1alpha`` and answers from the descriptor pool, which keeps no
source info (the generated modules embed descriptors without it). This servicer answers both
versions (their messages are the same on the wire; only the package differs) and serves
airlock's own files from ``airlock/_proto/descriptors.binpb``, the FileDescriptorSet that
``scripts/gen_protos.py`` writes with ``--include_source_info``, so a reflection client reads
the comments. Every other file (google/protobuf, google/api, health) comes from the pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from functools import cache
from importlib import resources

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2 as pb  # type: ignore[import-untyped]

#: The two reflection services served (same messages, two package names).
V1_SERVICE = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
_METHOD = "ServerReflectionInfo"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _v1_file() -> descriptor_pb2.FileDescriptorProto:
    """``grpc.reflection.v1``'s file: grpcio-reflection's v1alpha file under the v1 package."""
    v1 = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    v1.name, v1.package = _V1_FILE, "grpc.reflection.v1"
    v1.ClearField("options")
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    for field in (f for m in v1.message_type for f in m.field):
        field.type_name = field.type_name.replace(old, new)
    for method in (m for s in v1.service for m in s.method):
        method.input_type = method.input_type.replace(old, new)
        method.output_type = method.output_type.replace(old, new)
    return v1


def _symbols(prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto]) -> Iterator[str]:
    for message in messages:
        name = f"{prefix}{message.name}"
        yield name
        yield from (f"{name}.{f.name}" for f in message.field)
        yield from (f"{name}.{e.name}" for e in message.enum_type)
        yield from _symbols(f"{name}.", message.nested_type)


def _file_symbols(file: descriptor_pb2.FileDescriptorProto) -> Iterator[str]:
    prefix = f"{file.package}." if file.package else ""
    yield from _symbols(prefix, file.message_type)
    yield from (f"{prefix}{e.name}" for e in file.enum_type)
    for service in file.service:
        yield f"{prefix}{service.name}"
        yield from (f"{prefix}{service.name}.{m.name}" for m in service.method)


@cache
def own_files() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """airlock's files with their source info, and reflection v1's file, by file name."""
    data = resources.files("airlock._proto").joinpath("descriptors.binpb").read_bytes()
    files = {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(data).file}
    files[_V1_FILE] = _v1_file()
    return files


class Reflection:
    """Answers ServerReflectionInfo streams (v1 and v1alpha) for ``service_names``."""

    def __init__(self, service_names: Iterable[str]) -> None:
        self._services = tuple(sorted(service_names))
        self._pool = descriptor_pool.Default()
        self._own = own_files()
        self._symbols = {s: f.name for f in self._own.values() for s in _file_symbols(f)}

    def _proto(self, name: str) -> descriptor_pb2.FileDescriptorProto:
        own = self._own.get(name)
        if own is not None:
            return own
        proto = descriptor_pb2.FileDescriptorProto()
        self._pool.FindFileByName(name).CopyToProto(proto)
        return proto

    def _files(self, request: pb.ServerReflectionRequest, name: str) -> pb.ServerReflectionResponse:
        """The file ``name`` and every file it imports, transitively (``KeyError``: unknown)."""
        seen: dict[str, bytes] = {}
        todo = [name]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            proto = self._proto(current)
            seen[current] = proto.SerializeToString()
            todo.extend(proto.dependency)
        found = pb.FileDescriptorResponse(file_descriptor_proto=list(seen.values()))
        return pb.ServerReflectionResponse(file_descriptor_response=found, original_request=request)

    def _containing(self, symbol: str) -> str:
        own = self._symbols.get(symbol)
        return own if own is not None else str(self._pool.FindFileContainingSymbol(symbol).name)

    def _extension_file(self, containing_type: str, number: int) -> str:
        message = self._pool.FindMessageTypeByName(containing_type)
        extension = self._pool.FindExtensionByNumber(message, number)
        return str(self._pool.FindFileContainingSymbol(extension.full_name).name)

    def _extension_numbers(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        message = self._pool.FindMessageTypeByName(request.all_extension_numbers_of_type)
        numbers = sorted(e.number for e in self._pool.FindAllExtensions(message))
        found = pb.ExtensionNumberResponse(base_type_name=message.full_name, extension_number=numbers)
        return pb.ServerReflectionResponse(all_extension_numbers_response=found, original_request=request)

    def answer(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        """One response for one request; an unknown name is a ``NOT_FOUND`` error response."""
        kind = request.WhichOneof("message_request")
        try:
            if kind == "file_by_filename":
                return self._files(request, request.file_by_filename)
            if kind == "file_containing_symbol":
                return self._files(request, self._containing(request.file_containing_symbol))
            if kind == "file_containing_extension":
                ext = request.file_containing_extension
                return self._files(request, self._extension_file(ext.containing_type, ext.extension_number))
            if kind == "all_extension_numbers_of_type":
                return self._extension_numbers(request)
            if kind == "list_services":
                listed = pb.ListServiceResponse(service=[pb.ServiceResponse(name=n) for n in self._services])
                return pb.ServerReflectionResponse(list_services_response=listed, original_request=request)
            return _error(request, grpc.StatusCode.INVALID_ARGUMENT, "no request kind set")
        except KeyError:
            return _error(request, grpc.StatusCode.NOT_FOUND, f"not found: {kind}")

    async def info(
        self, requests: AsyncIterator[pb.ServerReflectionRequest], _context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerReflectionResponse]:
        """The ServerReflectionInfo method (both versions)."""
        async for request in requests:
            yield self.answer(request)


def _error(
    request: pb.ServerReflectionRequest, code: grpc.StatusCode, text: str
) -> pb.ServerReflectionResponse:
    error = pb.ErrorResponse(error_code=code.value[0], error_message=text)
    return pb.ServerReflectionResponse(error_response=error, original_request=request)


def add_reflection_services(server: grpc.aio.Server, service_names: Iterable[str]) -> None:
    """Serve reflection v1 and v1alpha on ``server``, listing ``service_names`` and both itself."""
    reflection = Reflection((*service_names, V1_SERVICE, V1ALPHA_SERVICE))
    handler = grpc.stream_stream_rpc_method_handler(
        reflection.info,
        request_deserializer=pb.ServerReflectionRequest.FromString,
        response_serializer=pb.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(name, {_METHOD: handler})
            for name in (V1_SERVICE, V1ALPHA_SERVICE)
        ]
    )

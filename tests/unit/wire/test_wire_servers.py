"""The gRPC plumbing both servers share, over real loopback channels: server reflection,
corrupt request bytes answered INVALID_ARGUMENT, the Bearer scheme matched case-insensitively;
and the contract files a client in another language needs (vendored health.proto, go_package,
enums that cover their closed sets)."""

from __future__ import annotations

import secrets
import subprocess
import sys
import typing
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc_tools
import pytest
from google.api import field_behavior_pb2
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, SqliteJobStore
from airlock.runner import RunnerConfig, RunnerServer
from airlock.state import SqliteStore
from layer0._error import TurnErrorKind

ROOT = Path(__file__).resolve().parents[3]
RUNNER = "airlock.runner.v1.Runner"
CONTROLLER = "airlock.controller.v1.Controller"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture
async def runner(token: str, tmp_path: Path) -> AsyncIterator[str]:
    async with RunnerServer(RunnerConfig(token=token, workspace=tmp_path)) as server:
        yield await server.start("127.0.0.1:0")


@pytest.fixture
async def controller(token: str, tmp_path: Path) -> AsyncIterator[str]:
    (tmp_path / "s.yaml").write_text("steps: []\n")
    config = tmp_path / "airlock.yaml"
    config.write_text(
        "version: 1\nagents:\n  a:\n    provider: {kind: scripted, script: s.yaml}\n    backend: process\n"
    )
    async with SqliteJobStore(tmp_path / "jobs.db") as store, SqliteStore(tmp_path / "state.db") as state:
        service = JobService(store, AgentRunner(load_config(config)), state)  # not started: no workers
        async with ControllerServer(service, token, "127.0.0.1:0") as server:
            assert server.address is not None
            yield server.address


def _auth(token: str, scheme: str = "Bearer") -> tuple[tuple[str, str]]:
    return (("authorization", f"{scheme} {token}"),)


async def _reflect(
    address: str,
    metadata: tuple[tuple[str, str], ...],
    *requests: reflection_pb2.ServerReflectionRequest,
    service: str = REFLECTION,
) -> list[reflection_pb2.ServerReflectionResponse]:
    """Calls ``service`` (v1alpha through its stub; v1, the same messages, by its method path)."""
    async with grpc.aio.insecure_channel(address) as channel:
        if service == REFLECTION:
            call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo
        else:
            call = channel.stream_stream(
                f"/{service}/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
            )
        return [r async for r in call(iter(requests), metadata=metadata)]


def _leading_comment(file: descriptor_pb2.FileDescriptorProto, service: str, method: str) -> str:
    """The comment above ``rpc method`` in ``file``, from its source info (path: service 6, method 2)."""
    s = [x.name for x in file.service].index(service)
    m = [x.name for x in file.service[s].method].index(method)
    found = [loc.leading_comments for loc in file.source_code_info.location if list(loc.path) == [6, s, 2, m]]
    return found[0] if found else ""


# --- reflection --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [REFLECTION_V1, REFLECTION])
async def test_the_runner_serves_reflection(runner: str, token: str, version: str) -> None:
    files = await _check_reflection(runner, token, "runner", RUNNER, version)
    comment = _leading_comment(files["airlock/runner/v1/runner.proto"], "Runner", "Execute")
    assert "RESOURCE_EXHAUSTED" in comment  # the proto comments reach reflection clients


@pytest.mark.parametrize("version", [REFLECTION_V1, REFLECTION])
async def test_the_controller_serves_reflection(controller: str, token: str, version: str) -> None:
    files = await _check_reflection(controller, token, "controller", CONTROLLER, version)
    comment = _leading_comment(files["airlock/controller/v1/controller.proto"], "Controller", "SubmitJob")
    assert "QUEUED" in comment


async def test_reflection_v1_describes_itself(runner: str, token: str) -> None:
    """A v1 client can resolve the v1 service it calls (grpcurl describes it)."""
    (found,) = await _reflect(
        runner,
        _auth(token),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=REFLECTION_V1),
        service=REFLECTION_V1,
    )
    (raw,) = found.file_descriptor_response.file_descriptor_proto
    file = descriptor_pb2.FileDescriptorProto.FromString(raw)
    assert (file.package, [s.name for s in file.service]) == ("grpc.reflection.v1", ["ServerReflection"])
    request = file.service[0].method[0].input_type
    assert request == ".grpc.reflection.v1.ServerReflectionRequest"


async def test_reflection_answers_an_unknown_symbol_not_found(runner: str, token: str) -> None:
    (answer,) = await _reflect(
        runner, _auth(token), reflection_pb2.ServerReflectionRequest(file_containing_symbol="no.Such")
    )
    assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


async def _check_reflection(
    address: str, token: str, target: str, service: str, version: str
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """The server lists its service, health and reflection, and serves its descriptors."""
    listed, described = await _reflect(
        address,
        _auth(token),
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=service),
        service=version,
    )
    names = {s.name for s in listed.list_services_response.service}
    assert names == {service, wire.HEALTH_SERVICE_NAME, REFLECTION, REFLECTION_V1}
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in described.file_descriptor_response.file_descriptor_proto
    ]
    by_name = {f.name: f for f in files}
    proto = f"airlock/{target}/v1/{target}.proto"
    assert service.rsplit(".", 1)[1] in [s.name for s in by_name[proto].service]
    # A client gets every file it needs to build the messages, dependencies included.
    assert set(by_name[proto].dependency) <= set(by_name)
    assert by_name[proto].options.go_package.startswith("airlock/gen/go/")
    return by_name


async def test_reflection_needs_the_token_like_every_rpc_but_health(runner: str) -> None:
    # The stream sends no request: the refusal comes from the call's metadata alone (a request
    # racing the server's rejection can fail on the client's side as INTERNAL instead).
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _reflect(runner, ())
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


# --- bearer scheme -------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR", "Bearer "])
async def test_the_bearer_scheme_is_case_insensitive(runner: str, token: str, scheme: str) -> None:
    async with grpc.aio.insecure_channel(runner) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await pb_grpc.RunnerStub(channel).Cancel(
                pb.CancelRequest(execution_id="x"), metadata=_auth(token, scheme)
            )
    assert e.value.code() == grpc.StatusCode.NOT_FOUND  # authenticated: the execution is unknown


@pytest.mark.parametrize(
    "value", ["Basic {token}", "Bearer", "Bearer {token}x", "Bearer{token}", "Token {token}", "{token}"]
)
async def test_other_schemes_and_wrong_tokens_are_unauthenticated(
    runner: str, token: str, value: str
) -> None:
    async with grpc.aio.insecure_channel(runner) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await pb_grpc.RunnerStub(channel).Cancel(
                pb.CancelRequest(execution_id="x"), metadata=(("authorization", value.format(token=token)),)
            )
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert token not in str(e.value.details())


# --- corrupt request bytes -----------------------------------------------------------------------


async def test_corrupt_requests_to_the_controller_are_invalid_argument(controller: str, token: str) -> None:
    async with grpc.aio.insecure_channel(controller) as channel:
        for method in ("SubmitJob", "GetJob", "ListJobs", "ListAgents", "GetStatus"):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await channel.unary_unary(f"/{CONTROLLER}/{method}")(b"\xff\xff\xff", metadata=_auth(token))
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
            assert "does not parse as its protobuf message" in str(e.value.details())
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for _ in channel.unary_stream(f"/{CONTROLLER}/WatchJob")(
                b"\x0a\x09id", metadata=_auth(token)
            ):
                pass
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Well-formed calls still work, with a lower-case scheme too.
        agents = await channel.unary_unary(
            f"/{CONTROLLER}/ListAgents",
            request_serializer=cpb.ListAgentsRequest.SerializeToString,
            response_deserializer=cpb.ListAgentsResponse.FromString,
        )(cpb.ListAgentsRequest(), metadata=_auth(token, "bearer"))
        assert [a.name for a in agents.agents] == ["a"]


async def test_corrupt_requests_to_health_are_invalid_argument_too(runner: str) -> None:
    health = f"/{wire.HEALTH_SERVICE_NAME}"
    async with grpc.aio.insecure_channel(runner) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await channel.unary_unary(f"{health}/Check")(b"\xff\xff")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as e:  # Watch writes with context.write()
            async for _ in channel.unary_stream(f"{health}/Watch")(b"\xff\xff"):
                pass
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- the contract files ----------------------------------------------------------------------------


def _compiled(proto: str, tmp_path: Path) -> descriptor_pb2.FileDescriptorProto:
    out = tmp_path / "set.bin"
    include = Path(grpc_tools.__file__).parent / "_proto"
    api_include = Path(field_behavior_pb2.__file__).parents[2]  # google/api/field_behavior.proto
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'protos'}", f"-I{include}",
         f"-I{api_include}", f"--descriptor_set_out={out}", proto],
        check=True,
        capture_output=True,
    )  # fmt: skip
    [file] = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return file


def _without_json_names(file: descriptor_pb2.FileDescriptorProto) -> None:
    """protoc fills ``json_name`` in descriptor sets; generated Python modules do not."""
    messages = list(file.message_type)
    while messages:
        message = messages.pop()
        for field in message.field:
            field.ClearField("json_name")
        messages.extend(message.nested_type)


def _methods(file: descriptor_pb2.FileDescriptorProto) -> dict[str, list[bytes]]:
    """Each service's methods, in name order (the files declare them in different orders)."""
    return {s.name: sorted(m.SerializeToString(deterministic=True) for m in s.method) for s in file.service}


def test_the_vendored_health_proto_is_what_the_servers_serve(tmp_path: Path) -> None:
    vendored = _compiled("grpc/health/v1/health.proto", tmp_path)
    _without_json_names(vendored)
    served = descriptor_pb2.FileDescriptorProto()
    health_pb2.DESCRIPTOR.CopyToProto(served)
    assert vendored.package == served.package
    assert sorted(m.SerializeToString(deterministic=True) for m in vendored.message_type) == sorted(
        m.SerializeToString(deterministic=True) for m in served.message_type
    )
    assert _methods(vendored) == _methods(served)
    assert vendored.options.go_package == "google.golang.org/grpc/health/grpc_health_v1"
    text = (ROOT / "protos/grpc/health/v1/health.proto").read_text(encoding="utf-8")
    assert text.startswith("// Copyright 2015 The gRPC Authors") and "Apache License, Version 2.0" in text


def test_every_airlock_proto_names_its_go_package(tmp_path: Path) -> None:
    for name in ("runner", "controller"):
        compiled = _compiled(f"airlock/{name}/v1/{name}.proto", tmp_path)
        assert compiled.options.go_package == f"airlock/gen/go/{name}/v1;{name}v1"


def test_each_wire_enum_covers_its_closed_set_and_its_proto_enum() -> None:
    for enum in wire.WIRE_ENUMS:
        numbers = [v.number for v in enum.enum.DESCRIPTOR.values]
        below = [n for n in numbers if n < 10]  # 10 on: the extension values (custom)
        assert below == list(range(len(below))), enum.what  # 0..n, no gaps
        assert numbers == sorted(set(numbers)), enum.what
        assert enum.enum.Name(0) == enum.unspecified
        assert enum.names() == [enum.enum.Name(n) for n in numbers[1:]], enum.what
        for value in enum.values:
            assert enum.from_proto(enum.to_proto(value)) == value
    assert typing.get_args(TurnErrorKind) == wire.TURN_ERROR_KINDS

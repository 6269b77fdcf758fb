"""RemoteTurn: a ``layer0.Turn`` that runs its AgentSpec on a runner over gRPC."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import BaseModel, ConfigDict, Field

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from airlock.errors import RunnerError
from airlock.policy import WorkspaceBlob, WorkspaceManifest, WorkspaceSnapshot, WorkspaceStopped
from airlock.spec import AgentSpec
from airlock.turn import (
    AnyTurnEvent,
    SuspendedForApproval,
    TurnEventSink,
    TurnSuspended,
)
from layer0 import Scope, TurnError, TurnInput, TurnOutput

from . import _reasons as reasons
from ._reasons import REASON_KEY
from ._server import DEFAULT_MAX_MESSAGE_BYTES, SERVICE_NAME
from ._transfer import Artifacts, collect_artifacts, put_files
from ._workspace_client import restore_workspace, snapshot_workspace


class TurnFinished(BaseModel):
    """The last event of an execution: the turn's output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["output"] = "output"
    output: TurnOutput


#: Everything ``RemoteTurn.events()`` yields: the turn's events (and the workspace's, when
#: snapshots are asked for), then ``TurnFinished`` (or ``TurnSuspended`` when the turn stopped
#: before calls that wait for approval).
RunnerEvent = Annotated[
    AnyTurnEvent | WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped | TurnFinished,
    Field(discriminator="type"),
]


@dataclass(frozen=True)
class StepInfo:
    """What one ``step()`` did."""

    #: True when the step finished the turn (the execution's stream then ends).
    complete: bool
    #: The model's text in this step.
    text: str
    #: Tools run in this step, in request order.
    tools: list[str]


class RunnerCallError(RunnerError):
    """Raised when a control call (cancel, pause, resume, step, health) fails; ``code`` is
    the gRPC status name (``NOT_FOUND``, ``FAILED_PRECONDITION``, ``UNAVAILABLE``, …),
    ``reason`` the runner's ``ErrorInfo.reason`` (``NOT_PAUSED``, …) when it gave one."""

    def __init__(self, code: str, message: str, reason: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.reason = reason

    @classmethod
    def of(cls, error: grpc.aio.AioRpcError, message: str) -> RunnerCallError:
        """The error for a failed call, with its code and reason."""
        return cls(error.code().name, message, _reason(error))


_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.INTERNAL,
}


def _reason(error: grpc.aio.AioRpcError) -> str | None:
    """Why the runner refused the call: ``ErrorInfo.reason`` (``BUSY``, ``INVALID_ARGUMENT``, …),
    or, from a runner that sends no details, its legacy ``airlock-reason`` trailer translated."""
    reason = wire.status_details(error).reason
    if reason:
        return reason
    for key, value in error.trailing_metadata() or ():
        if key == REASON_KEY:
            return reasons.FROM_LEGACY.get(str(value), str(value))
    return None


def channel_lost(error: BaseException) -> bool:
    """Whether a failed turn's ``error`` is its runner's channel going away (UNAVAILABLE): the
    sandbox around the runner may be dying, and may take a while to show it."""
    cause = error.__cause__
    return isinstance(cause, grpc.aio.AioRpcError) and cause.code() == grpc.StatusCode.UNAVAILABLE


def agent_refused(error: BaseException) -> str | None:
    """Why the runner refused to build the turn from its AgentSpec (INVALID_ARGUMENT about the
    ``agent`` itself: a custom tool its image cannot load, a tool source that does not start),
    one problem per line; None for any other failure."""
    cause = error.__cause__
    if not isinstance(cause, grpc.aio.AioRpcError) or cause.code() != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    if _reason(cause) != reasons.INVALID_ARGUMENT:
        return None
    violations = wire.status_details(cause).violations
    if violations:
        problems = [text for field, text in violations if field == "agent"]
    else:
        details = (cause.details() or "").splitlines()
        problems = [line.removeprefix("agent: ") for line in details if line.startswith("agent: ")]
    return "\n".join(problems) or None


def fence_breached(error: BaseException) -> str | None:
    """Why the runner refused every turn because its network fence was breached (the sandbox
    reached an address its policy must block); None for any other failure."""
    cause = error.__cause__
    if not isinstance(cause, grpc.aio.AioRpcError) or cause.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    return (
        (cause.details() or "the network fence was breached") if _reason(cause) == reasons.ISOLATION else None
    )


def _turn_error(error: grpc.aio.AioRpcError, address: str) -> TurnError:
    """The TurnError for a failed Execute call (connection loss and busy: retryable)."""
    code = error.code()
    message = f"runner at {address}: {code.name}: {error.details()}"
    if code in _RETRYABLE:
        return TurnError.retryable(message)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and _reason(error) == reasons.BUSY:
        return TurnError.retryable(message)
    if code == grpc.StatusCode.UNKNOWN:
        return TurnError.other(message)
    return TurnError.non_retryable(message)


class RemoteTurn:
    """Runs an AgentSpec on a runner; implements ``layer0.Turn``.

    Args:
        address: ``host:port`` or ``unix:/path/to.sock``.
        token: the runner's bearer token (sent as ``authorization`` metadata; never shown
            in ``repr``).
        spec: the agent to run; also available as ``.spec``.
        state: a read-only state snapshot ``(scope, key, value)`` handed to every execution
            (e.g. the session's history).
        execution_id: id of the next execution (default: a fresh uuid4 per execution); the
            control calls address the latest execution.
        root_certificates: PEM root certificate(s) to verify the runner's TLS certificate;
            None: plaintext (loopback or unix socket inside the host).
        tls_server_name: the name to verify the certificate for, when it differs from the
            address host.
        max_message_bytes: largest message sent or received.
        environment: variables the runner sets before it builds the turn (a warm sandbox's
            env_var credentials, bound when it is claimed); secrets, never shown in ``repr``.
        resume_from: a session snapshot (``SessionState`` JSON with every message) the next
            execution continues from instead of starting the turn.
    """

    def __init__(
        self,
        address: str,
        token: str,
        spec: AgentSpec,
        *,
        state: Iterable[tuple[Scope, str, Any]] | None = None,
        execution_id: str | None = None,
        root_certificates: bytes | None = None,
        tls_server_name: str | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        environment: Mapping[str, str] | None = None,
        resume_from: str | None = None,
    ) -> None:
        if not token:
            raise RunnerError("RemoteTurn needs the runner's token")
        self.address = address
        self.spec = spec
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._spec_proto = wire.spec_to_proto(spec)
        self._state_proto = wire.state_to_proto(state or [])
        self._environment = dict(environment or {})
        #: The snapshot the next execution continues from (None: it starts the turn).
        self.resume_from = resume_from
        #: The next execution pauses before its first step.
        self.start_paused = False
        #: The next execution snapshots the workspace before each checkpoint (None: it does not).
        self.workspace: wire.WorkspaceOptions | None = None
        self._next_id = execution_id
        self.execution_id: str | None = None
        self._root_certificates = root_certificates
        self._options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        if tls_server_name:
            self._options.append(("grpc.ssl_target_name_override", tls_server_name))
        self._channel: grpc.aio.Channel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stub: Any = None

    def __repr__(self) -> str:
        return f"RemoteTurn(address={self.address!r}, agent={self.spec.name!r})"

    # --- channel ---------------------------------------------------------------------------

    def _connect(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._channel is None or self._loop is not loop:
            if self._root_certificates is not None:
                credentials = grpc.ssl_channel_credentials(root_certificates=self._root_certificates)
                self._channel = grpc.aio.secure_channel(self.address, credentials, options=self._options)
            else:
                self._channel = grpc.aio.insecure_channel(self.address, options=self._options)
            self._loop = loop
            self._stub = pb_grpc.RunnerStub(self._channel)
        return self._stub

    async def close(self) -> None:
        """Close the channel (a later call reconnects)."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def __aenter__(self) -> RemoteTurn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the turn --------------------------------------------------------------------------

    async def execute(self, input: TurnInput, events: TurnEventSink | None = None) -> TurnOutput:
        """Run one turn on the runner and return its output; ``events`` receives each event.

        Raises:
            TurnError: the turn's own error (its kind preserved), ``retryable`` when the
                runner is unreachable, the connection drops or the runner is busy,
                ``non_retryable`` for a refused request (bad token, invalid spec or input,
                oversized message).
            SuspendedForApproval: the turn stopped before calls that wait for approval.
        """
        async for event in self.events(input):
            if isinstance(event, TurnFinished):
                return event.output
            if isinstance(event, TurnSuspended):
                if events is not None:
                    await events(event)
                raise SuspendedForApproval(event)
            if events is not None:  # workspace events: only when snapshots were asked for,
                await events(cast(Any, event))  # by a sink that takes them (a sandbox's)
        raise TurnError.retryable(f"runner at {self.address}: the stream ended without a result")

    async def events(self, input: TurnInput) -> AsyncIterator[RunnerEvent]:
        """Run one turn and yield its events as they happen, ending with ``TurnFinished``.

        Closing the iterator early cancels the execution on the runner.

        Raises:
            TurnError: as :meth:`execute`.
        """
        stub = self._connect()
        self.execution_id = self._next_id or str(uuid.uuid4())
        self._next_id = None
        request = pb.ExecuteRequest(
            agent=self._spec_proto,
            input=wire.input_to_proto(input),
            execution_id=self.execution_id,
            state=self._state_proto,
            environment=self._environment,
        )
        if self.resume_from is not None:
            request.resume.CopyFrom(pb.Json(text=self.resume_from))
        request.start_paused = self.start_paused
        if self.workspace is not None:
            request.workspace.CopyFrom(wire.options_to_proto(self.workspace))
        call = stub.Execute(request, metadata=self._metadata)
        try:
            async for message in call:
                item = wire.event_from_proto(message)
                if isinstance(item, TurnOutput):
                    yield TurnFinished(output=item)
                    return
                if isinstance(item, TurnError):
                    raise item
                yield item
                if isinstance(item, TurnSuspended):
                    return
        except grpc.aio.AioRpcError as e:
            raise _turn_error(e, self.address) from e
        except wire.MalformedMessage as e:
            raise TurnError.other(f"runner at {self.address} sent a malformed event: {e}") from e
        finally:
            call.cancel()
        raise TurnError.retryable(f"runner at {self.address}: the stream ended without a result")

    # --- workspace files -------------------------------------------------------------------

    async def put_files(self, files: Sequence[tuple[str, bytes]]) -> None:
        """Write ``files`` (``(path relative to the workspace, content)``) into the sandbox's
        workspace before the turn.

        Raises:
            FileRefused: a path that is not confined, or the runner's refusal (over its caps,
                a link in the way).
            RunnerCallError: the runner is unreachable.
        """
        try:
            await put_files(self._connect(), self._metadata, files)
        except grpc.aio.AioRpcError as e:
            raise RunnerCallError.of(e, f"runner at {self.address}: {e.details()}") from e

    async def restore_workspace(
        self, manifest: WorkspaceManifest, read: Callable[[str], Awaitable[bytes]]
    ) -> str:
        """Restore ``manifest`` into the runner's empty workspace, each distinct content read
        once by ``read`` (SHA-256 hex → zlib data); the manifest digest the runner wrote.

        Raises:
            RunnerCallError: the runner refused (a non-empty workspace, a bad path or hash) or
                is unreachable.
        """
        try:
            return await restore_workspace(self._connect(), self._metadata, manifest, read)
        except grpc.aio.AioRpcError as e:
            raise RunnerCallError.of(e, f"runner at {self.address}: {e.details()}") from e

    async def snapshot_workspace(
        self, max_bytes: int = 0
    ) -> AsyncIterator[WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped]:
        """A full snapshot of the idle runner's workspace: blob pieces then the snapshot, or
        one WorkspaceStopped (over ``max_bytes``; 0: no cap).

        Raises:
            RunnerCallError: the runner is unreachable or refused.
            MalformedMessage: the runner sent something else.
        """
        try:
            async for event in snapshot_workspace(self._connect(), self._metadata, max_bytes):
                yield event
        except grpc.aio.AioRpcError as e:
            raise RunnerCallError.of(e, f"runner at {self.address}: {e.details()}") from e

    async def collect_artifacts(self) -> Artifacts:
        """The files the turn left under the spec's artifact globs (checked on this side).

        Raises:
            FilesOverCap: more files or bytes than the spec's caps (the whole set refused).
            FileRefused: what the runner sent is not confined or not asked for.
            RunnerCallError: the runner is unreachable.
        """
        try:
            return await collect_artifacts(self._connect(), self._metadata, self.spec.artifacts)
        except grpc.aio.AioRpcError as e:
            raise RunnerCallError.of(e, f"runner at {self.address}: {e.details()}") from e

    # --- control ---------------------------------------------------------------------------

    def _current(self) -> str:
        if self.execution_id is None:
            raise RunnerError("no execution started yet")
        return self.execution_id

    async def _control(self, method: str, request: Any) -> Any:
        stub = self._connect()
        try:
            return await getattr(stub, method)(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise RunnerCallError.of(e, str(e.details())) from e

    async def cancel(self) -> None:
        """Cancel the current execution; its result is an output with exit reason
        ``custom("cancelled")`` and the metadata used so far.

        Raises:
            RunnerCallError: ``NOT_FOUND`` when it already ended, or a channel failure.
        """
        await self._control("Cancel", pb.CancelRequest(execution_id=self._current()))

    async def pause(self) -> None:
        """Ask the current execution to pause at its next turn boundary (a ``paused`` event
        follows).

        Raises:
            RunnerCallError: as :meth:`cancel`.
        """
        await self._control("Pause", pb.PauseRequest(execution_id=self._current()))

    async def resume(self) -> None:
        """Let a paused execution run on.

        Raises:
            RunnerCallError: as :meth:`cancel`.
        """
        await self._control("Resume", pb.ResumeRequest(execution_id=self._current()))

    async def step(self) -> StepInfo:
        """Run exactly one step of the paused execution; it stays paused afterwards.

        Raises:
            RunnerCallError: ``FAILED_PRECONDITION`` when not paused; as :meth:`cancel`.
        """
        response = await self._control("Step", pb.StepRequest(execution_id=self._current()))
        return StepInfo(complete=response.complete, text=response.text, tools=list(response.tools))

    async def signal(self, signal_type: str, data: Any = None) -> None:
        """Hand the current execution a signal, applied at its next step boundary
        (``cancel``, ``budget``, or feedback the model reads).

        Raises:
            RunnerCallError: as :meth:`cancel`.
        """
        request = pb.SignalRequest(
            execution_id=self._current(), signal_type=signal_type, data=wire.json_to_proto(data)
        )
        await self._control("Signal", request)

    async def health(self) -> str:
        """The runner's health status (``SERVING``, ``NOT_SERVING``, …); no token needed.

        Raises:
            RunnerCallError: the runner is unreachable.
        """
        self._connect()
        assert self._channel is not None
        return await _health_status(self._channel)

    async def wait_until_serving(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Poll health until SERVING.

        Raises:
            RunnerCallError: ``DEADLINE_EXCEEDED`` when not serving within ``timeout``.
        """
        await _poll_serving(self.health, self.address, timeout)


async def wait_until_serving(
    address: str,
    timeout: float = 10.0,  # noqa: ASYNC109
    *,
    root_certificates: bytes | None = None,
    tls_server_name: str | None = None,
) -> None:
    """Poll the health of the runner at ``address`` until SERVING, before any agent is known
    (e.g. a warm pool member): plaintext (a Unix socket or loopback), or TLS checked against
    ``root_certificates`` (for ``tls_server_name``, as :class:`RemoteTurn`).

    Raises:
        RunnerCallError: ``DEADLINE_EXCEEDED`` when not serving within ``timeout``.
    """
    if root_certificates is None:
        channel = grpc.aio.insecure_channel(address)
    else:
        options = [("grpc.ssl_target_name_override", tls_server_name)] if tls_server_name else []
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        channel = grpc.aio.secure_channel(address, credentials, options=options)
    async with channel:
        await _poll_serving(lambda: _health_status(channel), address, timeout)


async def _health_status(channel: grpc.aio.Channel) -> str:
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        response = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    except grpc.aio.AioRpcError as e:
        raise RunnerCallError.of(e, str(e.details())) from e
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


async def _poll_serving(check: Callable[[], Awaitable[str]], address: str, timeout: float) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    last = "UNKNOWN"
    while time.monotonic() < deadline:
        try:
            last = await check()
            if last == "SERVING":
                return
        except RunnerCallError as e:
            last = e.code
        await asyncio.sleep(0.02)
    raise RunnerCallError("DEADLINE_EXCEEDED", f"runner at {address} not serving after {timeout}s ({last})")

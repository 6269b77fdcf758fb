"""The controller's gRPC face: the Controller service, health, server reflection, bearer-token
auth, and the token file. Requests that do not parse or do not validate are INVALID_ARGUMENT;
an unknown job is NOT_FOUND, a job not in the state a request needs FAILED_PRECONDITION, and
a name that may not decide on a job's calls PERMISSION_DENIED."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import NoReturn

import grpc
from google.protobuf.duration_pb2 import Duration
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.errors import AirlockError, ConfigError, bounded_detail
from airlock.policy import FileRefused, FilesOverCap

from . import _convert as jc
from . import _event_wire as ew
from ._service import JobService
from ._service_core import JobNotAwaiting, JobNotFound, NotAnApprover

_log = logging.getLogger("airlock.controller")

#: The fully qualified service name (health checks report it).
SERVICE_NAME = "airlock.controller.v1.Controller"
#: Largest request or response (a TurnInput with images, a long output).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Where ``airlock serve`` listens unless told otherwise (loopback only).
DEFAULT_ADDRESS = "127.0.0.1:7878"


class ControllerServerError(AirlockError):
    """The controller server cannot start (address in use, unreadable token file, …)."""


def read_token_file(path: Path) -> str:
    """The bearer token in an existing file (e.g. a mounted Secret); never created or printed.

    Raises:
        ControllerServerError: missing, unreadable or empty.
    """
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ControllerServerError(f"cannot read the token file {path}: {e.strerror or e}") from e
    if not token:
        raise ControllerServerError(f"the token file {path} is empty")
    return token


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The bearer token in ``path``, creating it (mode 0600) if absent; ``(token, created)``.

    Raises:
        ControllerServerError: the file exists but is empty or unreadable, or cannot be written.
    """
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
        created = True
    except OSError as e:
        raise ControllerServerError(f"cannot read the token file {path}: {e}") from e
    else:
        if not token:
            raise ControllerServerError(f"the token file {path} is empty; delete it to generate a new token")
        return token, False
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token + "\n")
    except FileExistsError:
        return load_or_create_token(path)
    except OSError as e:
        raise ControllerServerError(f"cannot write the token file {path}: {e}") from e
    return token, created


#: The range of a valid google.protobuf.Duration (its documented bounds, about 10,000 years).
#: Beyond it a limit in ms no longer fits the job store's 64-bit integers.
_MAX_DURATION_SECONDS = 315_576_000_000
#: Event sequence numbers are SQLite integers (signed 64-bit); an ``after_seq`` above every
#: possible one is read as this (no event follows it either way).
_MAX_SEQ = 2**63 - 1


def _duration_problem(duration: Duration, path: str) -> str | None:
    """What makes ``duration`` not a valid google.protobuf.Duration, or None."""
    if not -_MAX_DURATION_SECONDS <= duration.seconds <= _MAX_DURATION_SECONDS:
        return f"{path}: {duration.seconds} s is outside a Duration's range (±{_MAX_DURATION_SECONDS} s)"
    if not -999_999_999 <= duration.nanos <= 999_999_999:
        return f"{path}: nanos {duration.nanos} is outside a Duration's range (±999999999)"
    return None


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, bounded_detail(message))
    raise AssertionError("unreachable: abort raises")  # pragma: no cover


#: Bytes of one piece of an artifact on the wire.
_ARTIFACT_PIECE = 1024 * 1024

#: The service's refusals of a request about one job, and their status codes.
_JOB_ERRORS: dict[type[AirlockError], grpc.StatusCode] = {
    JobNotFound: grpc.StatusCode.NOT_FOUND,
    JobNotAwaiting: grpc.StatusCode.FAILED_PRECONDITION,
    NotAnApprover: grpc.StatusCode.PERMISSION_DENIED,
}
_JOB_ERROR_TYPES = tuple(_JOB_ERRORS)


async def _refuse(context: grpc.aio.ServicerContext, error: AirlockError) -> NoReturn:
    """Abort with the status code of one of the service's refusals (:data:`_JOB_ERRORS`)."""
    code = next((c for kind, c in _JOB_ERRORS.items() if isinstance(error, kind)), grpc.StatusCode.INTERNAL)
    await _abort(context, code, str(error))


class _Servicer(cpb_grpc.ControllerServicer):
    """Maps Controller RPCs onto a JobService; errors become status codes."""

    def __init__(self, service: JobService) -> None:
        self.service = service

    async def SubmitJob(self, request: cpb.SubmitJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        if not request.agent:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "agent is required")
        if not request.HasField("input"):
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "input (a TurnInput) is required")
        durations = [(request.max_duration, "max_duration")] if request.HasField("max_duration") else []
        if request.input.HasField("config") and request.input.config.HasField("max_duration"):
            durations.append((request.input.config.max_duration, "input.config.max_duration"))
        for duration, path in durations:
            problem = _duration_problem(duration, path)
            if problem is not None:
                return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, problem)
        try:
            turn_input = wire.input_from_proto(request.input)
        except wire.MalformedMessage as e:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e.under("input")))
        if not turn_input.message.as_blocks():
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "input.message: empty")
        max_ms = wire.duration_from_proto(request.max_duration) if request.HasField("max_duration") else None
        until_stable = None
        if request.HasField("until_stable"):
            try:
                until_stable = jc.until_stable_from_proto(request.until_stable)
            except wire.MalformedMessage as e:
                return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        try:
            job = await self.service.submit(
                request.agent,
                turn_input,
                queue=request.queue or None,
                max_duration_ms=max_ms,
                workflow=request.workflow or None,
                until_stable=until_stable,
                files=[(f.path, f.data) for f in request.files],
            )
        except FilesOverCap as e:
            return await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, f"files: {e}")
        except FileRefused as e:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"files: {e}")
        except ConfigError as e:
            code = (
                grpc.StatusCode.NOT_FOUND if "unknown agent" in str(e) else grpc.StatusCode.INVALID_ARGUMENT
            )
            return await _abort(context, code, str(e))
        return jc.job_to_proto(job)

    async def GetJob(self, request: cpb.GetJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        try:
            return jc.job_to_proto(await self.service.get(request.id))
        except JobNotFound as e:
            return await _abort(context, grpc.StatusCode.NOT_FOUND, str(e))

    async def WatchJob(
        self, request: cpb.WatchJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cpb.JobEvent]:
        try:
            async for event in self.service.watch(request.id, min(request.after_seq, _MAX_SEQ)):
                yield ew.event_to_proto(event)
        except JobNotFound as e:
            await _abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        except wire.MalformedMessage as e:
            await _abort(
                context, grpc.StatusCode.INTERNAL, f"an event of job {request.id} cannot be sent: {e}"
            )

    async def ListArtifacts(
        self, request: cpb.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListArtifactsResponse:
        try:
            found = await self.service.artifacts(request.id)
        except JobNotFound as e:
            return await _abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        return cpb.ListArtifactsResponse(
            artifacts=[cpb.Artifact(path=a.path, size=a.size, sha256=a.sha256) for a in found]
        )

    async def GetArtifact(
        self, request: cpb.GetArtifactRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cpb.ArtifactData]:
        try:
            data = await self.service.artifact(request.id, request.path)
        except JobNotFound as e:
            await _abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        for at in range(0, max(len(data), 1), _ARTIFACT_PIECE):
            yield cpb.ArtifactData(data=data[at : at + _ARTIFACT_PIECE])

    async def CancelJob(self, request: cpb.CancelJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        try:
            return jc.job_to_proto(await self.service.cancel(request.id, request.reason))
        except JobNotFound as e:
            return await _abort(context, grpc.StatusCode.NOT_FOUND, str(e))

    async def ListJobs(
        self, request: cpb.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListJobsResponse:
        try:
            where = jc.filter_from_proto(request)
        except ValueError as e:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        jobs = await self.service.find(where)
        return cpb.ListJobsResponse(jobs=[jc.job_to_proto(j) for j in jobs])

    async def GetJobLogs(
        self, request: cpb.GetJobLogsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.GetJobLogsResponse:
        try:
            lines = await self.service.logs(request.id, min(request.after_seq, _MAX_SEQ))
        except JobNotFound as e:
            return await _abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        return cpb.GetJobLogsResponse(lines=[ew.event_to_proto(e) for e in lines])

    async def ListAgents(
        self, request: cpb.ListAgentsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListAgentsResponse:
        agents = []
        for name, agent in sorted(self.service.runner.config.agents.items()):
            info = cpb.AgentInfo(
                name=name,
                backend=agent.backend,
                provider=agent.spec.provider.kind,
                local_model=agent.uses_local_model,
            )
            if agent.spec.provider.model:
                info.model = agent.spec.provider.model
            agents.append(info)
        return cpb.ListAgentsResponse(agents=agents)

    async def GetStatus(
        self, request: cpb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ControllerStatus:
        proofs = await self.service.runner.isolation_proofs()
        return cpb.ControllerStatus(isolation=[jc.isolation_proof_to_proto(p) for p in proofs])

    # -- approvals and control of a running turn -----------------------------------------------

    async def ApproveJob(self, request: cpb.ApproveJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        if not request.approver:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "approver is required")
        try:
            job = await self.service.approve(request.id, request.approver, request.comment)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        return jc.job_to_proto(job)

    async def RejectJob(self, request: cpb.RejectJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        if not request.approver:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "approver is required")
        if not request.reason.strip():
            return await _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, "reason is required (the model reads it)"
            )
        try:
            job = await self.service.reject(request.id, request.approver, request.reason)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        return jc.job_to_proto(job)

    async def PauseJob(
        self, request: cpb.JobControlRequest, context: grpc.aio.ServicerContext
    ) -> cpb.JobControlResponse:
        try:
            await self.service.pause(request.id)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        return cpb.JobControlResponse()

    async def ResumeJob(
        self, request: cpb.JobControlRequest, context: grpc.aio.ServicerContext
    ) -> cpb.JobControlResponse:
        try:
            await self.service.resume(request.id)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        return cpb.JobControlResponse()

    async def StepJob(
        self, request: cpb.JobControlRequest, context: grpc.aio.ServicerContext
    ) -> cpb.StepJobResponse:
        try:
            info, events = await self.service.step(request.id)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        try:
            recorded = [ew.event_to_proto(e) for e in events]
        except wire.MalformedMessage as e:
            return await _abort(
                context, grpc.StatusCode.INTERNAL, f"an event of job {request.id} cannot be sent: {e}"
            )
        return cpb.StepJobResponse(complete=info.complete, text=info.text, tools=info.tools, events=recorded)

    async def InspectJob(
        self, request: cpb.JobControlRequest, context: grpc.aio.ServicerContext
    ) -> cpb.InspectJobResponse:
        try:
            found = await self.service.inspect(request.id)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        state = found.state.model_dump(mode="json") if found.state is not None else None
        return cpb.InspectJobResponse(
            running=found.running,
            paused=found.paused,
            state=wire.json_to_proto(state),
            pending=[wire.pending_call_to_proto(c) for c in found.pending],
        )

    async def SignalWorkflow(
        self, request: cpb.SignalWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> cpb.SignalWorkflowResponse:
        if not request.workflow:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "workflow is required")
        if not request.signal_type:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "signal_type is required")
        try:
            data = wire.json_from_proto(request.data, present=request.HasField("data"))
        except wire.MalformedMessage as e:
            return await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e.under("data")))
        count, delivered = await self.service.signal(request.workflow, request.signal_type, data)
        return cpb.SignalWorkflowResponse(count=count, delivered_to=delivered)

    # -- the audit ----------------------------------------------------------------------------

    async def GetWeave(
        self, request: cpb.GetWeaveRequest, context: grpc.aio.ServicerContext
    ) -> cpb.GetWeaveResponse:
        try:
            root, records = await self.service.weave(request.id)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        return cpb.GetWeaveResponse(root=root, records=[jc.record_to_proto(r) for r in records])

    async def VerifyJob(
        self, request: cpb.GetWeaveRequest, context: grpc.aio.ServicerContext
    ) -> cpb.VerifyJobResponse:
        try:
            root, report = await self.service.verify(request.id)
        except _JOB_ERROR_TYPES as e:
            return await _refuse(context, e)
        breaks = [
            cpb.ChainBreak(position=b.position, record_id=b.record_id, problem=b.problem)
            for b in report.breaks
        ]
        return cpb.VerifyJobResponse(
            root=root,
            ok=report.ok,
            records=report.records,
            breaks=breaks,
            sealed=self.service.weaves.key is not None,
        )


class ControllerServer:
    """A grpc.aio server with the Controller service, health and bearer-token auth.

    Use as an async context manager; :attr:`address` is where it listens once started
    (``host:0`` picks a free port).

    Args:
        service: the started JobService it serves.
        token: the bearer token every Controller RPC must present, or an async function
            answering the current one (a token file followed as it changes).
        address: ``host:port`` or ``unix:/path``.
    """

    def __init__(
        self, service: JobService, token: str | Callable[[], Awaitable[str]], address: str = DEFAULT_ADDRESS
    ) -> None:
        if not token:
            raise ControllerServerError("the controller refuses to start without a token")
        self.service = service
        self.listen = address
        self.address: str | None = None
        self._health = HealthServicer()
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
        interceptors = [wire.BearerAuth(token), wire.RejectCorruptRequests()]
        self._server = grpc.aio.server(interceptors=interceptors, options=options)
        cpb_grpc.add_ControllerServicer_to_server(_Servicer(service), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        wire.add_reflection(self._server, SERVICE_NAME)

    def __repr__(self) -> str:  # never show the token
        return f"ControllerServer(address={self.address or self.listen!r})"

    async def start(self) -> str:
        """Listen and serve; the address actually bound.

        Raises:
            ControllerServerError: the address cannot be bound.
        """
        try:
            port = self._server.add_insecure_port(self.listen)
        except (OSError, RuntimeError) as e:
            raise ControllerServerError(f"cannot listen on {self.listen}: {e}") from e
        if not self.listen.startswith("unix:") and port == 0:
            raise ControllerServerError(f"cannot listen on {self.listen} (in use?)")
        await self._server.start()
        self.address = (
            self.listen if self.listen.startswith("unix:") else f"{self.listen.rsplit(':', 1)[0]}:{port}"
        )
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self.address

    async def stop(self, grace: float = 2.0) -> None:
        """NOT_SERVING, then close the server (open watch streams end)."""
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self._server.stop(grace)

    async def wait_for_termination(self) -> None:
        """Wait until the server stops (cancelling the wait leaves the server intact)."""
        await asyncio.shield(self._server.wait_for_termination())

    async def __aenter__(self) -> ControllerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

"""The controller's gRPC face: the Controller service, health, server reflection, bearer-token
auth, and the token file. Every refusal is a ``google.rpc.Status`` with ErrorInfo (and
BadRequest, RetryInfo where they apply): see :mod:`._grpc_errors` for the reasons. A request
that does not parse or validate is INVALID_ARGUMENT with every problem at once; an unknown job
NOT_FOUND, a job not in the state a request needs FAILED_PRECONDITION, a name that may not
decide on a job's calls PERMISSION_DENIED, a stopping controller UNAVAILABLE."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.errors import AirlockError, ConfigError
from airlock.identity import AuthSettings, FailureThrottle, Permission
from airlock.jobs import DEFAULT_ADDRESS, MAX_MESSAGE_BYTES, Job
from airlock.jobs import convert as jc
from airlock.jobs import event_wire as ew
from airlock.policy import FileRefused, FilesOverCap

from . import _access as access
from . import _grpc_errors as errors
from . import _grpc_pages as pages
from . import _grpc_requests as rq
from ._authn import authenticator as bootstrap_authenticator
from ._callers import CallerCheck, PrincipalAuth, caller, current_call
from ._grpc_closing import RefuseWhileClosing
from ._grpc_identity import IdentityApi
from ._grpc_retention import prune_jobs
from ._grpc_sandboxes import SandboxApi
from ._grpc_workflows import query_workflow
from ._quotas import QuotaExceeded
from ._service import JobService
from ._tls import ServerTls, bind_port

_log = logging.getLogger("airlock.controller")

#: The fully qualified service name (health checks report it).
SERVICE_NAME = "airlock.controller.v1.Controller"


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


#: Event sequence numbers are SQLite integers (signed 64-bit); an ``after_seq`` above every
#: possible one is read as this (no event follows it either way).
_MAX_SEQ = 2**63 - 1
#: Bytes of one piece of an artifact on the wire.
_ARTIFACT_PIECE = 1024 * 1024


class _Servicer(cpb_grpc.ControllerServicer):
    """Maps Controller RPCs onto a JobService; refusals become statuses with typed details
    (:mod:`._grpc_errors`)."""

    def __init__(self, service: JobService, identity: IdentityApi | None) -> None:
        self.service = service
        self.identity = identity

    @property
    def sandboxes(self) -> SandboxApi:
        """The sandbox RPCs over the service's long-lived sandboxes."""
        return SandboxApi(self.service.sandboxes)

    async def _job(self, context: grpc.aio.ServicerContext, job_id: str, use: access.Use) -> Job:
        """The job the request names, if the caller may ``use`` it (else the call ends:
        NOT_FOUND for another tenant's, PERMISSION_DENIED naming the permission). The audit
        log notes it and its tenant."""
        call = current_call()
        call.target = job_id
        try:
            job = await access.job_for(call.principal, job_id, use, self.service.get)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        call.tenant = job.tenant
        return job

    async def _approver(
        self, context: grpc.aio.ServicerContext, request: cpb.ApproveJobRequest | cpb.RejectJobRequest
    ) -> str:
        """Who decides: the authenticated principal (a request naming anyone else is refused),
        holding the approver permission for the job's agent."""
        try:
            rq.read_decision(request)
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        principal = caller()
        if request.approver and request.approver != principal.name:
            refusal = access.PermissionDenied(
                Permission.APPROVE,
                f"{principal.name} may not decide as {request.approver!r}: decisions are recorded "
                "as the authenticated principal (leave approver empty)",
            )
            return await errors.refuse(context, refusal)
        await self._job(context, request.id, "approve")
        return principal.name

    async def SubmitJob(self, request: cpb.SubmitJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        try:
            submission = rq.read_submission(request)
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        principal = caller()
        current_call().detail = f"agent {request.agent}"
        try:
            access.require(principal, Permission.SUBMIT, f"submit to agent {request.agent!r}", request.agent)
        except access.PermissionDenied as e:
            return await errors.refuse(context, e)
        if request.sandbox:
            await self.sandboxes.sandbox(context, request.sandbox, "steer")
            current_call().target = ""
        try:
            job = await self.service.submit(
                request.agent,
                submission.input,
                queue=request.queue or None,
                max_duration_ms=submission.max_duration_ms,
                workflow=request.workflow or None,
                until_stable=submission.until_stable,
                files=[(f.path, f.data) for f in request.files],
                tenant=principal.tenant,
                owner=principal.name,
                sandbox=request.sandbox or None,
            )
        except QuotaExceeded as e:
            return await errors.refuse(context, e)
        except FilesOverCap as e:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED
            return await errors.fail(context, code, "FILES_OVER_CAP", f"files: {e}")
        except FileRefused as e:
            return await errors.invalid(context, [wire.Problem("files", str(e))])
        except ConfigError as e:
            if "unknown agent" in str(e):
                return await errors.fail(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", str(e))
            return await errors.invalid(context, wire.problems_of(e))
        current_call().target = job.id
        return jc.job_to_proto(job)

    async def GetJob(self, request: cpb.GetJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        await errors.need_id(context, request)
        return jc.job_to_proto(await self._job(context, request.id, "see"))

    async def WatchJob(
        self, request: cpb.WatchJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cpb.JobEvent]:
        await errors.need_id(context, request)
        await self._job(context, request.id, "see")
        try:
            async for event in self.service.watch(request.id, min(request.after_seq, _MAX_SEQ)):
                yield ew.event_to_proto(event)
        except errors.REFUSED as e:
            await errors.refuse(context, e)
        except wire.MalformedMessage as e:
            await _unsendable(context, request.id, e)

    async def ListArtifacts(
        self, request: cpb.ListArtifactsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListArtifactsResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "see")
        try:
            found = sorted(await self.service.artifacts(request.id), key=lambda a: a.path)
            page, token = pages.page_of(request, found, lambda a: a.path, pages.page_size(request.page_size))
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        return cpb.ListArtifactsResponse(
            artifacts=[cpb.Artifact(path=a.path, size=a.size, sha256=a.sha256) for a in page],
            next_page_token=token,
        )

    async def GetArtifact(
        self, request: cpb.GetArtifactRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cpb.ArtifactData]:
        problems = errors.required(request, "id", "path")
        if problems:
            await errors.invalid(context, problems)
        await self._job(context, request.id, "see")
        try:
            data = await self.service.artifact(request.id, request.path)
        except errors.REFUSED as e:
            await errors.refuse(context, e)
        for at in range(0, max(len(data), 1), _ARTIFACT_PIECE):
            yield cpb.ArtifactData(data=data[at : at + _ARTIFACT_PIECE])

    async def CancelJob(self, request: cpb.CancelJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        await errors.need_id(context, request)
        await self._job(context, request.id, "steer")
        try:
            return jc.job_to_proto(await self.service.cancel(request.id, request.reason))
        except errors.REFUSED as e:
            return await errors.refuse(context, e)

    async def ForkJob(self, request: cpb.ForkJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        await errors.need_id(context, request)
        original = await self._job(context, request.id, "see")
        agent = request.agent or original.agent
        try:
            access.require(caller(), Permission.SUBMIT, f"fork a job to agent {agent!r}", agent)
            job = await self.service.fork(
                original.id,
                at=request.at or None,
                message=request.message or None,
                agent=agent,
                tenant=original.tenant,
                owner=caller().name,
            )
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        except ConfigError as e:
            return await errors.fail(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", str(e))
        current_call().detail = f"fork of {original.id} to agent {agent}"
        return jc.job_to_proto(job)

    # -- long-lived sandboxes ---------------------------------------------------------------------

    async def CreateSandbox(
        self, request: cpb.CreateSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        return await self.sandboxes.create(request, context)

    async def GetSandbox(
        self, request: cpb.GetSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        return await self.sandboxes.get(request, context)

    async def ListSandboxes(
        self, request: cpb.ListSandboxesRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListSandboxesResponse:
        return await self.sandboxes.listed(request, context)

    async def PauseSandbox(
        self, request: cpb.PauseSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        return await self.sandboxes.pause(request, context)

    async def ResumeSandbox(
        self, request: cpb.ResumeSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        return await self.sandboxes.resume(request, context)

    async def RemoveSandbox(
        self, request: cpb.RemoveSandboxRequest, context: grpc.aio.ServicerContext
    ) -> cpb.Sandbox:
        return await self.sandboxes.remove(request, context)

    async def ListJobs(
        self, request: cpb.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListJobsResponse:
        problems: list[wire.Problem] = []
        try:
            where = jc.filter_from_proto(request)
        except wire.MalformedMessage as e:
            problems += e.problems
        try:
            after = pages.read_token(request, request.page_token)
        except wire.MalformedMessage as e:
            problems += e.problems
        if problems:
            return await errors.invalid(context, problems)
        if after is not None:
            where = where.model_copy(update={"before_id": after})
        try:
            where = access.scoped_filter(caller(), where)
        except access.PermissionDenied as e:
            return await errors.refuse(context, e)
        jobs = await self.service.find(where)
        token = pages.make_token(request, jobs[-1].id) if len(jobs) == where.limit else ""
        return cpb.ListJobsResponse(jobs=[jc.job_to_proto(j) for j in jobs], next_page_token=token)

    async def GetJobLogs(
        self, request: cpb.GetJobLogsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.GetJobLogsResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "see")
        try:
            lines = await self.service.logs(request.id, min(request.after_seq, _MAX_SEQ))
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        return cpb.GetJobLogsResponse(lines=[ew.event_to_proto(e) for e in lines])

    async def ListAgents(
        self, request: cpb.ListAgentsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListAgentsResponse:
        configured = sorted(self.service.runner.config.agents.items())
        try:
            page, token = pages.page_of(
                request, configured, lambda a: a[0], pages.page_size(request.page_size)
            )
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        agents = []
        for name, agent in page:
            info = cpb.AgentInfo(
                name=name,
                backend=agent.backend,
                provider=wire.PROVIDER_KIND.to_proto(agent.spec.provider.kind),
                local_model=agent.uses_local_model,
            )
            if agent.spec.provider.model:
                info.model = agent.spec.provider.model
            agents.append(info)
        return cpb.ListAgentsResponse(agents=agents, next_page_token=token)

    async def GetStatus(
        self, request: cpb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ControllerStatus:
        try:
            access.require(caller(), Permission.ADMIN, "read the controller's status")
        except access.PermissionDenied as e:
            return await errors.refuse(context, e)
        proofs = await self.service.runner.isolation_proofs()
        return cpb.ControllerStatus(isolation=[jc.isolation_proof_to_proto(p) for p in proofs])

    # -- approvals and control of a running turn -----------------------------------------------

    async def ApproveJob(self, request: cpb.ApproveJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        approver = await self._approver(context, request)
        try:
            job = await self.service.approve(request.id, approver, request.comment)
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        return jc.job_to_proto(job)

    async def RejectJob(self, request: cpb.RejectJobRequest, context: grpc.aio.ServicerContext) -> cpb.Job:
        approver = await self._approver(context, request)
        try:
            job = await self.service.reject(request.id, approver, request.reason)
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        return jc.job_to_proto(job)

    async def PauseJob(
        self, request: cpb.PauseJobRequest, context: grpc.aio.ServicerContext
    ) -> cpb.PauseJobResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "steer")
        try:
            await self.service.pause(request.id)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        return cpb.PauseJobResponse()

    async def ResumeJob(
        self, request: cpb.ResumeJobRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ResumeJobResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "steer")
        try:
            await self.service.resume(request.id)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        return cpb.ResumeJobResponse()

    async def StepJob(
        self, request: cpb.StepJobRequest, context: grpc.aio.ServicerContext
    ) -> cpb.StepJobResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "steer")
        try:
            info, events = await self.service.step(request.id)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        try:
            recorded = [ew.event_to_proto(e) for e in events]
        except wire.MalformedMessage as e:
            return await _unsendable(context, request.id, e)
        return cpb.StepJobResponse(complete=info.complete, text=info.text, tools=info.tools, events=recorded)

    async def InspectJob(
        self, request: cpb.InspectJobRequest, context: grpc.aio.ServicerContext
    ) -> cpb.InspectJobResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "see")
        try:
            found = await self.service.inspect(request.id)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
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
        try:
            data = rq.read_signal(request)
        except wire.MalformedMessage as e:
            return await errors.invalid(context, e.problems)
        principal, call = caller(), current_call()
        call.target = request.workflow
        try:
            access.require(principal, Permission.OWN_JOBS, f"signal workflow {request.workflow!r}")
        except access.PermissionDenied as e:
            return await errors.refuse(context, e)
        count, delivered = await self.service.signal(
            request.workflow, request.signal_type, data, principal.tenant
        )
        return cpb.SignalWorkflowResponse(count=count, delivered_to=delivered)

    async def QueryWorkflow(
        self, request: cpb.QueryWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> cpb.QueryWorkflowResponse:
        return await query_workflow(self.service, request, context)

    # -- the audit ----------------------------------------------------------------------------

    # -- identity and tenancy ----------------------------------------------------------------------

    async def _identity(self, context: grpc.aio.ServicerContext) -> IdentityApi:
        if self.identity is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this server has no identity store")
            raise AssertionError("context.abort returned")  # pragma: no cover
        return self.identity

    async def WhoAmI(
        self, request: cpb.WhoAmIRequest, context: grpc.aio.ServicerContext
    ) -> cpb.WhoAmIResponse:
        return IdentityApi.who_am_i()

    async def CreateKey(
        self, request: cpb.CreateKeyRequest, context: grpc.aio.ServicerContext
    ) -> cpb.CreateKeyResponse:
        return await (await self._identity(context)).create_key(request, context)

    async def ListKeys(
        self, request: cpb.ListKeysRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListKeysResponse:
        return await (await self._identity(context)).list_keys(request, context)

    async def RevokeKey(self, request: cpb.RevokeKeyRequest, context: grpc.aio.ServicerContext) -> cpb.ApiKey:
        return await (await self._identity(context)).revoke_key(request, context)

    async def ListTenants(
        self, request: cpb.ListTenantsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListTenantsResponse:
        return await (await self._identity(context)).list_tenants(request, context)

    async def ListAudit(
        self, request: cpb.ListAuditRequest, context: grpc.aio.ServicerContext
    ) -> cpb.ListAuditResponse:
        return await (await self._identity(context)).list_audit(request, context)

    async def PruneJobs(
        self, request: cpb.PruneJobsRequest, context: grpc.aio.ServicerContext
    ) -> cpb.PruneJobsResponse:
        return await prune_jobs(self.service.pruner, request, context)

    async def GetWeave(
        self, request: cpb.GetWeaveRequest, context: grpc.aio.ServicerContext
    ) -> cpb.GetWeaveResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "see")
        try:
            root, records = await self.service.weave(request.id)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
        return cpb.GetWeaveResponse(root=root, records=[jc.record_to_proto(r) for r in records])

    async def VerifyJob(
        self, request: cpb.VerifyJobRequest, context: grpc.aio.ServicerContext
    ) -> cpb.VerifyJobResponse:
        await errors.need_id(context, request)
        await self._job(context, request.id, "see")
        try:
            root, report = await self.service.verify(request.id)
        except errors.REFUSED as e:
            return await errors.refuse(context, e)
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
            anchored=report.anchored,
            anchored_records=report.anchored_records,
        )


async def _unsendable(context: grpc.aio.ServicerContext, job_id: str, error: Exception) -> NoReturn:
    message = f"an event of job {job_id} cannot be sent: {error}"
    await errors.fail(context, grpc.StatusCode.INTERNAL, "INTERNAL", message)


class ControllerServer:
    """A grpc.aio server with the Controller service, health, reflection, and every call
    authenticated as a principal (:mod:`._callers`) and authorized (:mod:`._access`).

    Use as an async context manager; :attr:`address` is where it listens once started
    (``host:0`` picks a free port).

    Args:
        service: the started JobService it serves.
        token: the bootstrap administrator's token, or an async function answering the
            current one (a token file followed as it changes).
        address: ``host:port`` or ``unix:/path``.
        authenticator: checks each call's credential (API keys, OIDC tokens, the bootstrap
            token); None: only the bootstrap token is accepted.
        identity: the key store, tenants and audit log the identity RPCs serve, and where
            state-changing calls are audited (None: those RPCs are refused as unimplemented
            and nothing is audited; the controller always gives one).
        tls: serve with TLS (mutual with a client CA); None: plaintext (a warning at start when
            the address is not loopback or a Unix socket).
        throttle: counts each address's failed authentications (past its limit, the address's
            calls are ``RESOURCE_EXHAUSTED`` for a while); None: the default limits.
    """

    def __init__(
        self,
        service: JobService,
        token: str | Callable[[], Awaitable[str]],
        address: str = DEFAULT_ADDRESS,
        *,
        authenticator: CallerCheck | None = None,
        identity: IdentityApi | None = None,
        tls: ServerTls | None = None,
        throttle: FailureThrottle | None = None,
    ) -> None:
        if not token:
            raise ControllerServerError("the controller refuses to start without a token")
        authenticator = authenticator or bootstrap_authenticator(AuthSettings(), None, token)
        self.service = service
        self.listen = address
        self.tls = tls
        self.address: str | None = None
        self._health = HealthServicer()
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
        self._closing = RefuseWhileClosing(SERVICE_NAME)
        record = identity.store.record_audit if identity else None
        auth = PrincipalAuth(authenticator.authenticate, record, throttle)
        interceptors = [auth, wire.RejectCorruptRequests(), self._closing]
        self._server = grpc.aio.server(interceptors=interceptors, options=options)
        cpb_grpc.add_ControllerServicer_to_server(_Servicer(service, identity), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        wire.add_reflection(self._server, SERVICE_NAME)

    def __repr__(self) -> str:  # never show the token
        return f"ControllerServer(address={self.address or self.listen!r})"

    async def start(self) -> str:
        """Listen and serve; the address actually bound.

        Raises:
            ControllerServerError: the address cannot be bound.
            TlsFileError: a TLS file is missing, unreadable or not PEM.
        """
        try:
            port = bind_port(self._server, self.listen, self.tls)
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

    async def begin_shutdown(self) -> None:
        """NOT_SERVING, and new Controller calls refused (UNAVAILABLE, SHUTTING_DOWN, RetryInfo)."""
        self._closing.close()
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    async def stop(self, grace: float = 2.0) -> None:
        """:meth:`begin_shutdown`, then close the server (open watch streams end)."""
        await self.begin_shutdown()
        await self._server.stop(grace)

    async def wait_for_termination(self) -> None:
        """Wait until the server stops (cancelling the wait leaves the server intact)."""
        await asyncio.shield(self._server.wait_for_termination())

    async def __aenter__(self) -> ControllerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

"""ControllerClient: the async client of ``airlock serve`` (what the CLI verbs use).

Its methods mirror :class:`JobService`'s and return the same types (a job, its events, an
:class:`Inspection`, the weave's records, a ChainReport)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import grpc
from pydantic import JsonValue, ValidationError

from airlock import wire as cv
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.errors import AirlockError
from airlock.identity import ApiKeyRecord
from airlock.sandbox import IsolationProof
from airlock.weave import ChainBreak, ChainReport, TurnRecord
from layer0 import TurnInput

from . import convert as jc
from . import event_wire as ew
from . import identity_wire as ji
from ._address import DEFAULT_ADDRESS, MAX_MESSAGE_BYTES
from ._model import FixedPointRun, Inspection, Job, JobEvent, JobFilter, StoredFile
from ._paths import default_data_dir
from ._prune import PruneSummary
from ._sandboxes import SandboxInfo
from ._tls import client_tls, open_channel, tls_hint
from .identity_wire import AuditRecord, CallerInfo, TenantUse

if TYPE_CHECKING:
    from airlock.runner import StepInfo

#: Environment variables the client reads when not given an address or token.
ADDRESS_ENV = "AIRLOCK_CONTROLLER"
TOKEN_ENV = "AIRLOCK_TOKEN"


class ControllerError(AirlockError):
    """A controller RPC failed.

    Attributes:
        code: the gRPC status code's name (``NOT_FOUND``, …).
        reason: the refusal's ``ErrorInfo.reason`` (``NOT_FOUND``, ``NOT_AWAITING``,
            ``INVALID_ARGUMENT``, ``SHUTTING_DOWN``, …; see ``airlock.controller.ERROR_REASONS``),
            or None when the answer carried none (e.g. the server is unreachable).
        violations: ``(field path, problem)`` per problem of a malformed request.
        retry_after_s: when the controller suggests trying again (``RetryInfo``), or None.
        metadata: the refusal's ``ErrorInfo.metadata``: the missing ``permission`` of a
            PERMISSION_DENIED; the ``quota``, its ``limit`` and ``used`` of a quota reached.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        reason: str | None = None,
        violations: Sequence[tuple[str, str]] = (),
        retry_after_s: float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.violations = tuple(violations)
        self.retry_after_s = retry_after_s
        self.metadata = dict(metadata or {})

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError, address: str) -> ControllerError:
        """The error for a failed call (the message says what to do for the common ones)."""
        code = error.code()
        details = error.details() or code.name
        found = cv.status_details(error)
        if code == grpc.StatusCode.UNAVAILABLE and found.reason is None:
            hint = tls_hint(details)
            details = (
                f"cannot reach the controller at {address} ({details}); {hint}"
                if hint
                else f"no controller at {address} ({details}); start one with `airlock serve`"
            )
        elif code == grpc.StatusCode.UNAUTHENTICATED:
            hint = f"set {TOKEN_ENV}, or --token, to your API key or the token `airlock serve` printed"
            details = f"{details} ({hint})"
        return cls(
            code.name,
            details,
            reason=found.reason,
            violations=found.violations,
            retry_after_s=found.retry_after_s,
            metadata=found.metadata,
        )


def default_token_file() -> Path:
    """Where ``airlock serve`` keeps its token by default."""
    return default_data_dir() / "token"


def resolve_token(token: str | None = None, token_file: Path | None = None) -> str:
    """The token to send: ``token``, else $AIRLOCK_TOKEN, else the token file.

    Raises:
        ControllerError: ``UNAUTHENTICATED`` when none is found.
    """
    if token:
        return token
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    path = token_file or default_token_file()
    try:
        found = path.read_text(encoding="utf-8").strip()
    except OSError:
        found = ""
    if not found:
        raise ControllerError(
            "UNAUTHENTICATED",
            f"no controller token: pass --token, set {TOKEN_ENV}, or run on the controller's machine "
            f"(it keeps the token in {path})",
        )
    return found


class ControllerClient:
    """Talks to a controller. Use as an async context manager.

    Args:
        address: ``host:port`` or ``unix:/path`` (default: $AIRLOCK_CONTROLLER, else
            ``127.0.0.1:7878``).
        token: the bearer token (never shown in ``repr``).
        tls_ca: the CA (PEM file or bytes) the controller's certificate is checked against
            (default: $AIRLOCK_TLS_CA). TLS is used with a CA, with a client certificate, and
            by default to any address but loopback or a Unix socket (then against the system
            roots); see :func:`airlock.jobs.client_tls`.
        tls: True: TLS even on loopback; False: plaintext even to a remote address (a warning);
            None: decided as above (or by $AIRLOCK_TLS).
        tls_server_name: the name the certificate is checked for, when not the address's host
            (default: $AIRLOCK_TLS_SERVER_NAME).
        client_cert: a client certificate (mutual TLS; default: $AIRLOCK_TLS_CERT), with
            ``client_key`` (default: $AIRLOCK_TLS_KEY).

    Raises:
        TlsFileError: a TLS file is missing or not PEM.
    """

    def __init__(
        self,
        address: str | None = None,
        token: str = "",
        *,
        tls_ca: Path | bytes | None = None,
        tls: bool | None = None,
        tls_server_name: str | None = None,
        client_cert: Path | bytes | None = None,
        client_key: Path | bytes | None = None,
    ) -> None:
        self.address = address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS
        secured = client_tls(
            self.address,
            tls_ca=tls_ca,
            tls=tls,
            server_name=tls_server_name,
            client_cert=client_cert,
            client_key=client_key,
        )
        self._metadata = (("authorization", f"Bearer {token}"),)
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        self._channel = open_channel(self.address, options, secured)
        self._stub: Any = cpb_grpc.ControllerStub(self._channel)

    def __repr__(self) -> str:
        return f"ControllerClient(address={self.address!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def _call(self, method: str, request: Any, timeout: float | None = 30.0) -> Any:  # noqa: ASYNC109
        try:
            return await getattr(self._stub, method)(request, metadata=self._metadata, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise ControllerError.from_rpc(e, self.address) from None

    async def submit(
        self,
        agent: str,
        input: TurnInput | str,
        *,
        queue: str | None = None,
        max_duration_ms: int | None = None,
        workflow: str | None = None,
        until_stable: FixedPointRun | None = None,
        files: Sequence[tuple[str, bytes]] = (),
        sandbox: str | None = None,
    ) -> Job:
        """Submit a job; it comes back QUEUED (a plain string is a user message). With
        ``until_stable`` (its ``max_iterations`` and ``window``), the agent is re-run on its own
        output until it is stable. ``files`` (``(path in the workspace, content)``) are placed
        in the job's workspace before its turn. With ``sandbox`` it runs in that long-lived
        sandbox (:meth:`create_sandbox`), after the jobs before it, in the same workspace."""
        turn_input = TurnInput.new(input) if isinstance(input, str) else input
        request = cpb.SubmitJobRequest(
            agent=agent,
            input=cv.input_to_proto(turn_input),
            queue=queue or "",
            workflow=workflow or "",
            files=[cpb.JobFile(path=path, data=data) for path, data in files],
            sandbox=sandbox or "",
        )
        if max_duration_ms is not None:
            request.max_duration.CopyFrom(cv.duration_to_proto(max_duration_ms))
        if until_stable is not None:
            request.until_stable.CopyFrom(jc.until_stable_to_proto(until_stable))
        return jc.job_from_proto(await self._call("SubmitJob", request))

    async def get(self, job_id: str) -> Job:
        """The job (``ControllerError`` NOT_FOUND if unknown)."""
        return jc.job_from_proto(await self._call("GetJob", cpb.GetJobRequest(id=job_id)))

    async def cancel(self, job_id: str, reason: str = "") -> Job:
        """Cancel the job; returns it once its sandbox is gone."""
        return jc.job_from_proto(
            await self._call("CancelJob", cpb.CancelJobRequest(id=job_id, reason=reason), None)
        )

    async def fork(
        self, job_id: str, *, at: str | None = None, message: str | None = None, agent: str | None = None
    ) -> Job:
        """A new job continuing ``job_id`` from its checkpoint ``at`` (a number or a record
        ``JOB:n``; None: the last) with the conversation and workspace there; ``message``
        continues the conversation, ``agent`` runs it under another agent. No such point:
        ``ControllerError`` FAILED_PRECONDITION, reason ``NOT_FORKABLE``."""
        request = cpb.ForkJobRequest(id=job_id, at=at or "", message=message or "", agent=agent or "")
        return jc.job_from_proto(await self._call("ForkJob", request))

    async def create_sandbox(self, agent: str, *, ttl_s: float | None = None) -> SandboxInfo:
        """A long-lived sandbox of ``agent`` (its box started), removed once idle ``ttl_s``
        seconds (None: kept until removed)."""
        request = cpb.CreateSandboxRequest(agent=agent)
        if ttl_s is not None:
            request.ttl.FromMilliseconds(round(ttl_s * 1000))
        return jc.sandbox_from_proto(await self._call("CreateSandbox", request, None))

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        """The sandbox (``ControllerError`` NOT_FOUND if unknown)."""
        return jc.sandbox_from_proto(await self._call("GetSandbox", cpb.GetSandboxRequest(id=sandbox_id)))

    async def sandboxes(self) -> list[SandboxInfo]:
        """The caller's tenant's sandboxes, newest first."""
        response = await self._call("ListSandboxes", cpb.ListSandboxesRequest())
        return [jc.sandbox_from_proto(s) for s in response.sandboxes]

    async def pause_sandbox(self, sandbox_id: str) -> SandboxInfo:
        """Snapshot the sandbox's workspace and remove its box (after the job running in it)."""
        request = cpb.PauseSandboxRequest(id=sandbox_id)
        return jc.sandbox_from_proto(await self._call("PauseSandbox", request, None))

    async def resume_sandbox(self, sandbox_id: str) -> SandboxInfo:
        """A fresh box for the sandbox, its workspace restored from the snapshot."""
        request = cpb.ResumeSandboxRequest(id=sandbox_id)
        return jc.sandbox_from_proto(await self._call("ResumeSandbox", request, None))

    async def remove_sandbox(self, sandbox_id: str) -> SandboxInfo:
        """Remove the sandbox's box and forget it (after the job running in it)."""
        request = cpb.RemoveSandboxRequest(id=sandbox_id)
        return jc.sandbox_from_proto(await self._call("RemoveSandbox", request, None))

    async def find(self, where: JobFilter | None = None) -> list[Job]:
        """Jobs, most recent first."""
        response = await self._call("ListJobs", jc.filter_to_proto(where or JobFilter()))
        return [jc.job_from_proto(j) for j in response.jobs]

    async def logs(self, job_id: str, after_seq: int = 0) -> list[JobEvent]:
        """The job's log lines (its ``log`` events)."""
        response = await self._call("GetJobLogs", cpb.GetJobLogsRequest(id=job_id, after_seq=after_seq))
        return [ew.event_from_proto(e) for e in response.lines]

    async def artifacts(self, job_id: str) -> list[StoredFile]:
        """The job's artifacts (path, size, SHA-256), in path order."""
        found: list[StoredFile] = []
        request = cpb.ListArtifactsRequest(id=job_id)
        while True:
            response = await self._call("ListArtifacts", request)
            found += [StoredFile(path=a.path, size=a.size, sha256=a.sha256) for a in response.artifacts]
            if not response.next_page_token:
                return found
            request.page_token = response.next_page_token

    async def artifact(self, job_id: str, path: str) -> bytes:
        """One artifact's content (``ControllerError`` NOT_FOUND: no such job or artifact)."""
        request = cpb.GetArtifactRequest(id=job_id, path=path)
        try:
            pieces = [p.data async for p in self._stub.GetArtifact(request, metadata=self._metadata)]
        except grpc.aio.AioRpcError as e:
            raise ControllerError.from_rpc(e, self.address) from None
        return b"".join(pieces)

    async def status(self) -> list[IsolationProof]:
        """Each backend's isolation proof where the controller's agents run (made now by the
        controller when it had none yet: this may take as long as a proof)."""
        response = await self._call("GetStatus", cpb.GetStatusRequest(), None)
        return [jc.isolation_proof_from_proto(p) for p in response.isolation]

    async def agents(self) -> list[dict[str, str | bool | None]]:
        """The agents the controller runs: name, backend, provider, model, and whether the model
        is served on the controller's machine (``local_model``)."""
        listed: list[Any] = []
        request = cpb.ListAgentsRequest()
        while True:
            response = await self._call("ListAgents", request)
            listed += response.agents
            if not response.next_page_token:
                break
            request.page_token = response.next_page_token
        return [
            {
                "name": a.name,
                "backend": a.backend,
                "provider": cv.PROVIDER_KIND.from_proto(a.provider, "provider"),
                "model": a.model or None,
                "local_model": a.local_model,
            }
            for a in listed
        ]

    # -- approvals ---------------------------------------------------------------------------------

    async def approve(self, job_id: str, comment: str = "") -> Job:
        """Approve, as the authenticated principal, the calls the job waits for; the job as it is
        then (``ControllerError`` FAILED_PRECONDITION: it waits for none; PERMISSION_DENIED:
        not one of its agent's approvers, or no approver role for its agent)."""
        request = cpb.ApproveJobRequest(id=job_id, comment=comment)
        return jc.job_from_proto(await self._call("ApproveJob", request))

    async def reject(self, job_id: str, reason: str) -> Job:
        """Reject them as the authenticated principal (the model reads ``reason``); raises as
        :meth:`approve`."""
        request = cpb.RejectJobRequest(id=job_id, reason=reason)
        return jc.job_from_proto(await self._call("RejectJob", request))

    # -- identity and tenancy ----------------------------------------------------------------------

    async def whoami(self) -> CallerInfo:
        """The principal this client's credential authenticates as."""
        return ji.caller_from_proto(await self._call("WhoAmI", cpb.WhoAmIRequest()))

    async def create_key(
        self, name: str, tenant: str, roles: Sequence[str], ttl_s: float | None = None
    ) -> tuple[ApiKeyRecord, str]:
        """Create an API key (administrators): its record, and its secret (shown only now)."""
        request = cpb.CreateKeyRequest(name=name, tenant=tenant, roles=list(roles))
        if ttl_s is not None:
            request.ttl.CopyFrom(cv.duration_to_proto(int(ttl_s * 1000)))
        response = await self._call("CreateKey", request)
        return ji.key_from_proto(response.key), response.secret

    async def keys(self, tenant: str | None = None, include_revoked: bool = False) -> list[ApiKeyRecord]:
        """The API keys (administrators), newest first."""
        request = cpb.ListKeysRequest(tenant=tenant or "", include_revoked=include_revoked)
        return [ji.key_from_proto(k) for k in (await self._call("ListKeys", request)).keys]

    async def revoke_key(self, key_id: str) -> ApiKeyRecord:
        """Revoke an API key (administrators); its next call is refused."""
        return ji.key_from_proto(await self._call("RevokeKey", cpb.RevokeKeyRequest(id=key_id)))

    async def prune(
        self, *, older_than_s: float | None = None, tenant: str | None = None, dry_run: bool = False
    ) -> PruneSummary:
        """Remove finished jobs (administrators): those finished over ``older_than_s`` seconds
        ago (None: as the controller's retention says), of ``tenant`` alone (None: every
        tenant's); ``dry_run``: count them, remove nothing."""
        request = cpb.PruneJobsRequest(tenant=tenant or "", dry_run=dry_run)
        if older_than_s is not None:
            request.older_than.CopyFrom(cv.duration_to_proto(int(older_than_s * 1000)))
        return PruneSummary.from_proto(await self._call("PruneJobs", request))

    async def tenants(self) -> list[TenantUse]:
        """Each visible tenant's use against its quotas."""
        response = await self._call("ListTenants", cpb.ListTenantsRequest())
        return [ji.tenant_from_proto(t) for t in response.tenants]

    async def audit(
        self,
        *,
        tenant: str | None = None,
        principal: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Audit entries, newest first (every page up to ``limit``)."""
        request = cpb.ListAuditRequest(
            tenant=tenant or "", principal=principal or "", action=action or "", page_size=min(limit, 1000)
        )
        if since is not None:
            request.since.CopyFrom(jc.timestamp_to_proto(since))
        found: list[AuditRecord] = []
        while len(found) < limit:
            response = await self._call("ListAudit", request)
            found += [ji.audit_from_proto(e) for e in response.entries]
            if not response.next_page_token:
                break
            request.page_token = response.next_page_token
        return found[:limit]

    # -- control of a running turn -----------------------------------------------------------------

    async def pause(self, job_id: str) -> None:
        """Pause the job's turn at its next step boundary (FAILED_PRECONDITION: none runs)."""
        await self._call("PauseJob", cpb.PauseJobRequest(id=job_id))

    async def resume(self, job_id: str) -> None:
        """Let the job's paused turn run on (as :meth:`pause`)."""
        await self._call("ResumeJob", cpb.ResumeJobRequest(id=job_id))

    async def step(self, job_id: str) -> tuple[StepInfo, list[JobEvent]]:
        """Run one step of the job's paused turn: what it did, and what the job recorded
        meanwhile (FAILED_PRECONDITION: not paused)."""
        from airlock.runner import StepInfo

        response = await self._call("StepJob", cpb.StepJobRequest(id=job_id), None)
        info = StepInfo(complete=response.complete, text=response.text, tools=list(response.tools))
        return info, [ew.event_from_proto(e) for e in response.events]

    async def inspect(self, job_id: str) -> Inspection:
        """The job, and its session as of its latest checkpoint: messages, counters, and the
        calls of its open step not finished (or waiting for approval)."""
        from airlock.turn import SessionState

        job = await self.get(job_id)
        response = await self._call("InspectJob", cpb.InspectJobRequest(id=job_id))
        data = cv.json_from_proto(response.state, present=response.HasField("state"))
        try:
            state = SessionState.model_validate(data) if data is not None else None
        except ValidationError as e:
            raise cv.MalformedMessage(problems=cv.validation_problems(e)).under("state") from e
        pending = [cv.pending_call_from_proto(c) for c in response.pending]
        return Inspection(
            job=job, state=state, running=response.running, paused=response.paused, pending=pending
        )

    async def signal(self, workflow: str, signal_type: str, data: JsonValue = None) -> tuple[int, list[str]]:
        """Record a signal for ``workflow`` and deliver it into its running turns: how many
        signals the workflow has received, and the jobs it reached."""
        request = cpb.SignalWorkflowRequest(
            workflow=workflow, signal_type=signal_type, data=cv.json_to_proto(data)
        )
        response = await self._call("SignalWorkflow", request)
        return int(response.count), list(response.delivered_to)

    async def query_workflow(self, workflow: str, query_type: str, params: JsonValue = None) -> JsonValue:
        """Answer a read-only query about ``workflow`` of the caller's tenant: ``status`` (its
        jobs and their states), ``spend`` (tokens and cost), ``budget`` (limits and what
        remains), ``signals``, ``signal_count`` (``ControllerError`` NOT_FOUND: no job or signal
        of it; INVALID_ARGUMENT: another query type)."""
        request = cpb.QueryWorkflowRequest(
            workflow=workflow, query_type=query_type, params=cv.json_to_proto(params)
        )
        response = await self._call("QueryWorkflow", request)
        return cv.json_from_proto(response.result, present=response.HasField("result"))

    # -- the audit -----------------------------------------------------------------------------------

    async def weave(self, job_id: str) -> tuple[str, list[TurnRecord]]:
        """The root of the job's tree and every turn record of it, in storage order."""
        response = await self._call("GetWeave", cpb.GetWeaveRequest(id=job_id))
        return response.root, [jc.record_from_proto(r) for r in response.records]

    async def verify(self, job_id: str) -> tuple[str, ChainReport, bool]:
        """Check the hash chain of the job's tree: its root, what the check found, and whether
        seals were checked too (the controller has an audit key)."""
        response = await self._call("VerifyJob", cpb.VerifyJobRequest(id=job_id))
        breaks = [
            ChainBreak(position=b.position, record_id=b.record_id, problem=b.problem) for b in response.breaks
        ]
        report = ChainReport(
            ok=response.ok,
            records=response.records,
            breaks=breaks,
            anchored=response.anchored,
            anchored_records=response.anchored_records,
        )
        return response.root, report, response.sealed

    async def watch(self, job_id: str, after_seq: int = 0) -> AsyncIterator[JobEvent]:
        """The job's events after ``after_seq``, live, until it is terminal."""
        call = self._stub.WatchJob(
            cpb.WatchJobRequest(id=job_id, after_seq=after_seq), metadata=self._metadata
        )
        try:
            async for message in call:
                yield ew.event_from_proto(message)
        except grpc.aio.AioRpcError as e:
            raise ControllerError.from_rpc(e, self.address) from None
        finally:
            call.cancel()

    async def wait(self, job_id: str) -> Job:
        """Follow the job until it is terminal; the final job."""
        async for _ in self.watch(job_id):
            pass
        return await self.get(job_id)

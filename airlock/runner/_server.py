"""The runner's gRPC server (grpc.aio): runs NeuronTurns and streams their events.

One :class:`RunnerServer` per sandbox. Every RPC of the ``Runner`` service needs the
sandbox's bearer token; ``grpc.health.v1.Health`` does not, and reports SERVING only while
the runner accepts executions. Server reflection is served too (behind the token). Requests
that do not parse or do not validate are INVALID_ARGUMENT, one line per problem.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from uuid import uuid4

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from airlock.errors import RunnerError, SpecError

from . import _reasons as reasons
from ._event_queue import EventQueue
from ._fence import DEFAULT_FENCE_TIMEOUT_S, NetworkFence, split_address
from ._log import logger
from ._reasons import REASON_KEY

if TYPE_CHECKING:  # the turn's machinery loads at the first Execute, not before SERVING
    from pydantic import JsonValue

    from airlock.spec import AgentSpec
    from airlock.tools import McpToolSet
    from airlock.turn import NeuronTurn, StepResult, TurnEvent, TurnLoop
    from layer0 import Scope, TurnInput, TurnOutput

    from ._custom_turn import CustomTurnLoop, CustomTurnRun
    from ._workspace_rpc import Workspaces

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_EVENT_PAYLOAD_BYTES = 16 * 1024
SERVICE_NAME = "airlock.runner.v1.Runner"

_log = logger()
_T = TypeVar("_T")


@dataclass(frozen=True)
class RunnerConfig:
    """How a runner serves.

    Attributes:
        token: the bearer token every Runner RPC must present (never logged).
        workspace: the directory the sandbox tools are confined to.
        max_message_bytes: largest request accepted and response sent.
        max_concurrent: executions allowed at once; one more gets RESOURCE_EXHAUSTED.
        event_payload_bytes: tool input/output carried in events is cut to this size.
        provider_factory: builds the model provider from the spec (default: the turn's own,
            ``airlock.providers.create_provider``); tests and embedders may override it.
        fence: ``host:port`` addresses the sandbox must not reach; one that accepts a
            connection fails every Execute (:class:`~._fence.NetworkFence`).
        fence_timeout_s: seconds one fence attempt may take.
    """

    token: str
    workspace: Path
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_concurrent: int = 1
    event_payload_bytes: int = DEFAULT_EVENT_PAYLOAD_BYTES
    provider_factory: Callable[[AgentSpec], Any] | None = None
    fence: tuple[str, ...] = ()
    fence_timeout_s: float = DEFAULT_FENCE_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.token:
            raise RunnerError("the runner refuses to start without a token")
        if self.max_concurrent < 1:
            raise RunnerError("max_concurrent must be at least 1")
        if self.max_message_bytes < 1024:
            raise RunnerError("max_message_bytes must be at least 1024")
        for address in self.fence:
            try:
                split_address(address)
            except ValueError as e:
                raise RunnerError(f"fence: {e}") from e

    def __repr__(self) -> str:  # never show the token
        return (
            f"RunnerConfig(workspace={str(self.workspace)!r}, max_message_bytes={self.max_message_bytes}, "
            f"max_concurrent={self.max_concurrent})"
        )


# ---------------------------------------------------------------------------------------------
# Auth


# ---------------------------------------------------------------------------------------------
# Executions


class _Execution:
    """One running turn: its session, its event queue and the task driving it.

    Pause and resume state: ``held`` from a Pause until the next Resume; ``paused`` from the
    session's ``paused`` event (it stopped at a turn boundary) until a Resume. A Pause while
    held and a Resume while not held do nothing, so each pause takes one Resume.
    """

    def __init__(
        self,
        execution_id: str,
        turn: NeuronTurn | CustomTurnRun,
        input: TurnInput,
        config: RunnerConfig,
        resume: str | None,
        snapshots: Workspaces | None = None,
    ) -> None:
        self.id = execution_id
        #: The workspace's snapshots, taken before each checkpoint (None: not asked for).
        self.snapshots = snapshots
        #: Every event kept; text deltas merged while the reader lags.
        self.events = EventQueue()
        self.payload_limit = config.event_payload_bytes
        self.message_limit = config.max_message_bytes - 1024
        self.session: TurnLoop | CustomTurnLoop = (
            turn.resume(resume, events=self._sink)
            if resume is not None
            else turn.start(input, events=self._sink)
        )
        self.task: asyncio.Task[None] | None = None
        self.held = False
        self.paused = False
        self.commands: asyncio.Queue[tuple[str, asyncio.Future[Any] | None]] = asyncio.Queue()
        self.cancelled = False
        #: Set when the runner itself is stopping (SIGTERM): the turn is cut short by the
        #: sandbox's end, not cancelled by its caller.
        self.stopping = False

    async def _sink(self, event: TurnEvent) -> None:
        from airlock.turn import TurnLog as TurnLogEvent

        if event.type == "suspended":
            return  # the stream's last event, put by drive()
        if event.type == "paused":  # before a client can see the event, so it may Step at once
            self.paused = True
        try:
            message = wire.event_to_proto(event, payload_limit=self.payload_limit)
        except wire.MalformedMessage as e:  # a value outside the wire's closed sets: not sent
            _log.warning("event not sent", extra={"execution_id": self.id, "error": str(e)})
            return
        checkpoint = message is not None and message.WhichOneof("kind") == "checkpoint"
        if checkpoint and self.snapshots is not None:  # blobs, then the manifest, then its checkpoint
            async for item in self.snapshots.events():
                self.events.put_nowait(item)
        if message is not None and (size := message.ByteSize()) > self.message_limit:
            kind = message.WhichOneof("kind")
            _log.warning("event not sent", extra={"execution_id": self.id, "kind": kind, "bytes": size})
            text = f"{kind} event not sent: {size} bytes, more than the runner's message limit"
            if kind == "checkpoint":  # a resume continues from the previous checkpoint
                text += "; a resume of this turn would continue from the previous checkpoint"
            message = wire.event_to_proto(TurnLogEvent(level="warn", message=text), payload_limit=0)
        if message is not None:
            self.events.put_nowait(message)

    def pause(self) -> None:
        """Stop at the next turn boundary (a ``paused`` event follows); nothing happens when
        paused already or a pause is pending."""
        if not self.held:
            self.held = True
            self.session.request_pause()

    def resume(self) -> None:
        """Run on from a pause, or take back a pause not yet reached (no ``paused`` event
        then); nothing happens when the turn is running."""
        if not self.held:
            return
        self.held = False
        if self.paused:
            self.paused = False
            self.commands.put_nowait(("resume", None))
        else:
            self.session.withdraw_pause()

    async def drive(self) -> None:
        """Run the turn to its end, honouring pause/step/resume; put the final event."""
        from airlock.turn import TurnSuspended
        from layer0 import TurnError

        final: pb.TurnEvent
        try:
            output = await self._run()
            if output is None:
                calls = self.session.awaiting
                final = wire.suspended_event(
                    TurnSuspended(iteration=self.session.state.iterations, calls=calls)
                )
            else:
                final = wire.output_event(output)
        except asyncio.CancelledError:
            final = self._stopped_event() if self.stopping else wire.output_event(self._cancelled_output())
        except TurnError as e:
            final = wire.error_event(e.kind, e.message, e.tool_name)
        except Exception as e:  # the turn must never take the runner down
            _log.exception("execution failed unexpectedly", extra={"execution_id": self.id})
            final = wire.error_event("other", f"runner: unexpected {type(e).__name__}: {e}")
        finally:
            self._fail_pending_steps()
        await self.events.put(final)

    def _cancelled_output(self) -> TurnOutput:
        return self.session.cancelled_output()

    def _stopped_event(self) -> pb.TurnEvent:
        """A retryable error, not a ``cancelled`` output: nobody cancelled the turn, its
        sandbox is going away (``docker stop``, a daemon restart, a pod's eviction)."""
        meta = self._cancelled_output().metadata
        return wire.error_event(
            "retryable",
            f"the runner was stopped (SIGTERM) during the turn, after {meta.turns_used} model call(s), "
            f"{len(meta.tools_called)} finished tool call(s), cost {meta.cost}; the turn did not finish",
        )

    async def _run(self) -> TurnOutput | None:
        """The turn's output; None when it stopped before calls that wait for approval."""
        while True:
            output = await self.session.run()
            if output is not None:
                return output
            if self.session.awaiting:
                return None
            # Paused at a turn boundary: run the Steps asked for until a Resume.
            while (command := await self.commands.get())[0] != "resume":
                result = await self.session.step()
                reply = command[1]
                if reply is not None and not reply.done():
                    reply.set_result(result)
                if result.output is not None or result.awaiting:
                    return result.output

    def _fail_pending_steps(self) -> None:
        while not self.commands.empty():
            _, reply = self.commands.get_nowait()
            if reply is not None and not reply.done():
                reply.set_exception(RunnerError("the execution ended"))


def _runnable(built: Any, resume: str | None) -> NeuronTurn | CustomTurnRun:
    """The built turn as an execution drives it (a custom turn: through its adapter).

    Raises:
        SpecError: a resume of a custom turn (it keeps no snapshot).
    """
    from airlock.turn import ExtensionTurn

    from ._custom_turn import CustomTurnRun

    if not isinstance(built, ExtensionTurn):
        return built  # type: ignore[no-any-return]
    if resume is not None:
        raise SpecError(f"agent {built.spec.name!r}: a custom turn cannot resume from a snapshot")
    return CustomTurnRun(built)


def _decode(
    request: pb.ExecuteRequest,
) -> tuple[AgentSpec, TurnInput, list[tuple[Scope, str, JsonValue]], str | None]:
    """The spec, input and state snapshot of an Execute request.

    Raises:
        MalformedMessage: each problem of the request, located from its root (``agent.…``,
            ``input.…``, ``state[i].…``).
    """
    problems: list[wire.Problem] = []

    def read(field: str, decode: Callable[[Any], _T], message: Any, present: bool = True) -> _T | None:
        if not present:
            problems.append(wire.Problem(field, "required"))
            return None
        try:
            return decode(message)
        except wire.MalformedMessage as e:
            problems.extend(e.under(field).problems)
            return None

    spec = read("agent", wire.spec_from_proto, request.agent, request.HasField("agent"))
    input = read("input", wire.input_from_proto, request.input, request.HasField("input"))
    state = read("state", wire.state_from_proto, request.state)
    if input is not None and not input.message.as_blocks():
        problems.append(wire.Problem("input.message", "empty: send the text or blocks of the turn"))
    from ._environ import environment_problems

    problems.extend(environment_problems(request.environment))
    resume = request.resume.text if request.HasField("resume") and request.resume.text else None
    if resume is not None and input is not None:
        problems.extend(_resume_problems(resume, input))
    if problems or spec is None or input is None or state is None:
        raise wire.MalformedMessage(problems=problems)
    return spec, input, state, resume


def _resume_problems(resume: str, input: TurnInput) -> list[wire.Problem]:
    """Why a snapshot cannot continue the request's turn (it does not validate, or it names
    another input: a caller may not change what the turn was asked)."""
    from pydantic import ValidationError

    from airlock.turn import SessionState

    try:
        state = SessionState.model_validate_json(resume)
    except ValidationError as e:
        return [
            wire.Problem(f"resume.{p.path}" if p.path else "resume", p.text)
            for p in wire.validation_problems(e)
        ]
    if state.input != input:
        return [wire.Problem("resume.input", "differs from the request's input")]
    return []


#: The problem of a control request (Cancel, Pause, Resume, Step, Signal) without an id.
_ID_REQUIRED = wire.Problem("execution_id", "is required")


def _step_response(result: StepResult) -> pb.StepResponse:
    return pb.StepResponse(
        complete=result.is_complete, text=result.text, tools=[t.name for t in result.tool_executions]
    )


# ---------------------------------------------------------------------------------------------
# Service


class _RunnerService(pb_grpc.RunnerServicer):
    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        #: The executions whose turn is built, by id: what Cancel, Pause, Resume, Step and
        #: Signal find.
        self.executions: dict[str, _Execution] = {}
        #: The id of every Execute accepted and whose stream has not ended (a slot each).
        self.reserved: set[str] = set()
        self.accepting = True
        self.idle = asyncio.Event()
        self.idle.set()
        self.fence = NetworkFence(config.fence, config.fence_timeout_s)
        self._workspaces: Workspaces | None = None

    @property
    def workspaces(self) -> Workspaces:
        """The workspace's snapshots and restores (built at first use)."""
        if self._workspaces is None:
            from ._workspace_rpc import Workspaces

            self._workspaces = Workspaces(self.config.workspace, self.config.max_message_bytes - 1024)
        return self._workspaces

    @property
    def active(self) -> int:
        """Executions accepted and not ended."""
        return len(self.reserved)

    async def _refuse(
        self,
        context: grpc.aio.ServicerContext,
        code: grpc.StatusCode,
        message: str,
        reason: str,
        problems: Sequence[wire.Problem] = (),
    ) -> NoReturn:
        """Abort with the typed details (ErrorInfo ``reason``, a violation per problem,
        RetryInfo when waiting helps) and the legacy ``airlock-reason`` trailer."""
        await wire.abort_with_details(
            context,
            code,
            message,
            reason=reason,
            problems=problems,
            retry_after_s=reasons.RETRY_AFTER_S.get(reason),
            trailing_metadata=((REASON_KEY, reasons.LEGACY[reason]),),
        )

    def _admit(self, key: str) -> tuple[grpc.StatusCode, str, str] | None:
        """Reserve ``key`` and a slot, or say why not (code, message, reason). Synchronous, so
        no other Execute runs between the checks and the reservation; the id comes first."""
        if key in self.reserved:
            return (
                grpc.StatusCode.ALREADY_EXISTS,
                f"execution {key!r} is already running on this runner; its id is free again once "
                "the Execute call that uses it has ended",
                reasons.DUPLICATE,
            )
        if not self.accepting:
            return grpc.StatusCode.UNAVAILABLE, "the runner is shutting down", reasons.SHUTTING_DOWN
        if self.active >= self.config.max_concurrent:
            return (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"runner busy: {self.active} execution(s) running, --max-concurrent is "
                f"{self.config.max_concurrent}; retry when it finishes",
                reasons.BUSY,
            )
        self.reserved.add(key)
        self.idle.clear()
        return None

    async def _check_fence(self, context: grpc.aio.ServicerContext) -> None:
        breached = await self.fence.breaches()
        if breached:
            _log.error("network fence breached: refusing every turn", extra={"reached": breached})
            await self._refuse(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"this sandbox reached {', '.join(breached)}, which its network policy must block: "
                "the cluster does not enforce the sandbox's NetworkPolicy here; no turn runs",
                reasons.ISOLATION,
            )

    async def Execute(
        self, request: pb.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        execution_id = request.execution_id
        key = execution_id or f"anonymous-{uuid4()}"
        refusal = self._admit(key)
        if refusal is not None:
            await self._refuse(context, *refusal)
        execution: _Execution | None = None
        mcp: McpToolSet | None = None
        try:
            await self._check_fence(context)
            turn, input, resume, mcp = await self._prepare(request, context)
            snapshots = await self._snapshots(request, context)
            execution = _Execution(key, turn, input, self.config, resume, snapshots)
            if request.start_paused:
                execution.pause()
            self.executions[key] = execution
            started = time.monotonic()
            _log.info("execution started", extra={"execution_id": execution_id, "agent": request.agent.name})
            execution.task = asyncio.create_task(execution.drive())
            while True:
                event = await execution.events.get()
                if event.WhichOneof("kind") not in ("output", "error", "suspended"):
                    yield event
                    continue
                if mcp is not None:  # the turn's MCP servers end with it, before its result
                    await asyncio.shield(mcp.aclose())  # is sent (the next Execute finds none)
                    mcp = None
                yield self._finished(execution_id, self._fit(event), started)
                return
        finally:
            await self._release(key, execution, mcp)

    async def _snapshots(
        self, request: pb.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> Workspaces | None:
        """The snapshots ``request.workspace`` asks for, begun (None: not asked for)."""
        try:
            options = wire.options_from_proto(request)
        except wire.MalformedMessage as e:
            await self._invalid(context, e.problems)
        if options is None:
            return None
        self.workspaces.begin(options)
        return self.workspaces

    def _finished(self, execution_id: str, event: pb.TurnEvent, started: float) -> pb.TurnEvent:
        """Log the end of an execution; return its final event."""
        kind = event.WhichOneof("kind")
        if kind == "output":
            result = str(wire.exit_reason_from_proto(event.output.exit_reason))
        elif kind == "error":
            result = wire.turn_error_from_proto(event.error).kind
        else:
            result = "awaiting approval"
        _log.info(
            "execution finished",
            extra={
                "execution_id": execution_id,
                "result": kind,
                "exit_reason": result,
                "ms": round((time.monotonic() - started) * 1000, 1),
            },
        )
        return event

    async def _release(self, key: str, execution: _Execution | None, mcp: McpToolSet | None) -> None:
        """End what an Execute left (its turn when the client went away or the server is
        stopping, its MCP servers), then free its id and slot, whatever happens meanwhile."""
        try:
            if execution is not None and execution.task is not None and not execution.task.done():
                execution.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await execution.task
            if mcp is not None:
                await asyncio.shield(mcp.aclose())
        finally:
            self.executions.pop(key, None)  # the id is this call's: an entry under it is its own
            self.reserved.discard(key)
            if not self.reserved:
                self.idle.set()

    def _fit(self, event: pb.TurnEvent) -> pb.TurnEvent:
        """The final event, or an error event when it would exceed the message limit."""
        size = event.ByteSize()
        if size <= self.config.max_message_bytes - 1024:
            return event
        return wire.error_event(
            "non_retryable",
            f"the turn's result is {size} bytes, more than this runner's message limit of "
            f"{self.config.max_message_bytes} bytes (--max-message-bytes)",
        )

    async def _prepare(
        self, request: pb.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> tuple[NeuronTurn | CustomTurnRun, TurnInput, str | None, McpToolSet]:
        """Decode and validate the request and build the turn, or the custom turn its spec
        names (INVALID_ARGUMENT on bad input, one line per problem, each led by the request
        field it is about)."""
        from airlock.build import build_agent
        from airlock.state import InMemoryStore
        from airlock.tools import open_mcp_tools
        from layer0 import read_only

        from ._environ import apply_environment

        try:
            spec, input, state, resume = _decode(request)
            apply_environment(request.environment)
            store = InMemoryStore()
            for scope, key, value in state:
                await store.write(scope, key, value)
            provider = self.config.provider_factory(spec) if self.config.provider_factory else None
            mcp = await open_mcp_tools(spec.mcp_servers, workspace=self.config.workspace)
            try:
                built = await asyncio.to_thread(  # importing custom tools may take a while
                    build_agent,
                    spec,
                    state=read_only(store),
                    workspace=self.config.workspace,
                    provider=provider,
                    mcp_tools=mcp.tools,
                )
                turn = _runnable(built, resume)
            except BaseException:  # the servers must not outlive a turn that was never built
                await asyncio.shield(mcp.aclose())
                raise
        except wire.MalformedMessage as e:
            await self._invalid(context, e.problems)
        except SpecError as e:  # the spec decoded, but its tools, hooks or provider do not build
            await self._invalid(context, [p.under("agent") for p in wire.problems_of(e)])
        except Exception as e:
            _log.exception("cannot build the turn")
            await self._refuse(
                context,
                grpc.StatusCode.INTERNAL,
                f"cannot build the turn: {type(e).__name__}: {e}",
                reasons.INTERNAL,
            )
        return turn, input, resume, mcp

    async def _invalid(self, context: grpc.aio.ServicerContext, problems: Sequence[wire.Problem]) -> NoReturn:
        details = "\n".join(str(p) for p in problems)
        _log.info("rejected an invalid request", extra={"error": details})
        await self._refuse(
            context, grpc.StatusCode.INVALID_ARGUMENT, details, reasons.INVALID_ARGUMENT, problems
        )

    def _find(self, execution_id: str) -> _Execution | None:
        return self.executions.get(execution_id)

    async def _get(self, execution_id: str, context: grpc.aio.ServicerContext) -> _Execution:
        """The running execution ``execution_id`` names; an empty id is INVALID_ARGUMENT, an
        unknown one NOT_FOUND."""
        if not execution_id:
            await self._invalid(context, [_ID_REQUIRED])
        execution = self._find(execution_id)
        if execution is None or execution.task is None:
            await self._refuse(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no running execution {execution_id!r}",
                reasons.NOT_FOUND,
            )
        return execution

    async def Cancel(self, request: pb.CancelRequest, context: grpc.aio.ServicerContext) -> pb.CancelResponse:
        execution = await self._get(request.execution_id, context)
        assert execution.task is not None
        _log.info("cancel requested", extra={"execution_id": execution.id})
        execution.cancelled = True
        execution.task.cancel()
        return pb.CancelResponse()

    async def Pause(self, request: pb.PauseRequest, context: grpc.aio.ServicerContext) -> pb.PauseResponse:
        execution = await self._get(request.execution_id, context)
        execution.pause()
        return pb.PauseResponse()

    async def Resume(self, request: pb.ResumeRequest, context: grpc.aio.ServicerContext) -> pb.ResumeResponse:
        execution = await self._get(request.execution_id, context)
        execution.resume()
        return pb.ResumeResponse()

    async def Signal(self, request: pb.SignalRequest, context: grpc.aio.ServicerContext) -> pb.SignalResponse:
        problems = [] if request.signal_type else [wire.Problem("signal_type", "required")]
        data: Any = None
        try:
            data = wire.json_from_proto(request.data, present=request.HasField("data"))
        except wire.MalformedMessage as e:
            problems += [p.under("data") for p in e.problems]
        if not request.execution_id:  # every problem of the request at once
            await self._invalid(context, [_ID_REQUIRED, *problems])
        execution = await self._get(request.execution_id, context)
        if problems:
            await self._invalid(context, problems)
        execution.session.deliver(request.signal_type, data)
        _log.info(
            "signal delivered", extra={"execution_id": execution.id, "signal_type": request.signal_type}
        )
        return pb.SignalResponse()

    async def Step(self, request: pb.StepRequest, context: grpc.aio.ServicerContext) -> pb.StepResponse:
        execution = await self._get(request.execution_id, context)
        if not execution.paused:
            await self._refuse(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"execution {execution.id!r} is not paused; Pause it first",
                reasons.NOT_PAUSED,
            )
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        execution.commands.put_nowait(("step", reply))
        try:
            result = await reply
        except RunnerError as e:
            await self._refuse(context, grpc.StatusCode.ABORTED, str(e), reasons.ENDED)
        return _step_response(result)

    async def PutFiles(
        self, request_iterator: AsyncIterator[pb.PutFilesRequest], context: grpc.aio.ServicerContext
    ) -> pb.PutFilesResponse:
        from airlock.policy import INPUT_CAPS, FileRefused, FilesOverCap

        from ._files import write_files
        from ._transfer import FileAssembly

        received = FileAssembly(INPUT_CAPS, "input files")
        sizes = received.sizes
        try:
            async for chunk in request_iterator:
                received.add(chunk.path, chunk.data, chunk.last)
            contents = list(received.finish().items())
            await asyncio.to_thread(write_files, self.config.workspace, contents)
        except FilesOverCap as e:
            await self._refuse(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e), reasons.TOO_LARGE)
        except FileRefused as e:
            await self._invalid(context, [wire.Problem("path", str(e))])
        _log.info("input files written", extra={"files": len(sizes), "bytes": sum(sizes.values())})
        return pb.PutFilesResponse(files=len(sizes), bytes=sum(sizes.values()))

    async def CollectArtifacts(
        self, request: pb.CollectArtifactsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ArtifactItem]:
        from pydantic import ValidationError

        from airlock.policy import FileRefused, FilesOverCap
        from airlock.spec import ArtifactSpec

        from ._files import SKIPPED_SYMLINK, collect, read_artifact
        from ._transfer import artifact_caps, file_chunks

        reserved = wire.reserved_problems(request)
        if reserved:
            await self._invalid(context, reserved)
        try:
            given = {
                name: getattr(request, name)
                for name in ("max_files", "max_file_bytes", "max_total_bytes")
                if getattr(request, name)  # 0: the default cap
            }
            spec = ArtifactSpec(globs=list(request.globs), **given)
        except ValidationError as e:
            await self._invalid(context, wire.validation_problems(e))
        caps = artifact_caps(spec)
        workspace = self.config.workspace
        try:
            found, skipped = await asyncio.to_thread(collect, workspace, spec.globs, caps)
            for path, reason in skipped:
                kind = (
                    pb.SKIP_REASON_SYMLINK if reason == SKIPPED_SYMLINK else pb.SKIP_REASON_NOT_REGULAR_FILE
                )
                yield pb.ArtifactItem(skipped=pb.SkippedFile(path=path, reason=reason, kind=kind))
            step = max(1024, min(1024 * 1024, self.config.max_message_bytes // 2))
            for path in found:
                data = await asyncio.to_thread(read_artifact, workspace, path, caps.max_file_bytes)
                for chunk in file_chunks(path, data, step):
                    yield pb.ArtifactItem(chunk=chunk)
        except FilesOverCap as e:
            await self._refuse(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e), reasons.TOO_LARGE)
        except FileRefused as e:
            await self._refuse(context, grpc.StatusCode.FAILED_PRECONDITION, str(e), reasons.FILE_REFUSED)
        _log.info("artifacts collected", extra={"files": len(found), "skipped": len(skipped)})

    async def RestoreWorkspace(
        self, request_iterator: AsyncIterator[pb.RestoreWorkspaceRequest], context: grpc.aio.ServicerContext
    ) -> pb.RestoreWorkspaceResponse:
        from google.protobuf.message import DecodeError

        from airlock.policy import FileRefused

        from ._workspace_rpc import NOT_EMPTY

        if not await self.workspaces.empty():
            await self._refuse(context, grpc.StatusCode.FAILED_PRECONDITION, NOT_EMPTY, reasons.FILE_REFUSED)
        try:
            response = await self.workspaces.restore(request_iterator)
        except DecodeError:  # a streamed item the interceptor (unary only) cannot catch
            text = "an item of the stream does not parse as a RestoreWorkspaceRequest (corrupt bytes)"
            await self._invalid(context, [wire.Problem("item", text)])
        except wire.MalformedMessage as e:
            await self._invalid(context, e.problems)
        except FileRefused as e:
            await self._invalid(context, [wire.Problem("item", str(e))])
        except OSError as e:  # the disk is full (the sandbox's disk limit), …
            text = f"the workspace cannot be written: {e.strerror or e}"
            await self._refuse(context, grpc.StatusCode.FAILED_PRECONDITION, text, reasons.FILE_REFUSED)
        _log.info("workspace restored", extra={"files": response.files, "bytes": response.bytes})
        return response

    async def SnapshotWorkspace(
        self, request: pb.SnapshotWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.TurnEvent]:
        if request.max_bytes < 0:
            await self._invalid(context, [wire.Problem("max_bytes", "must not be negative")])
        async for event in self.workspaces.full(request.max_bytes):
            yield event


# ---------------------------------------------------------------------------------------------
# Server


@dataclass(frozen=True)
class TlsFiles:
    """Server certificate chain and private key (PEM files)."""

    cert: Path
    key: Path


class RunnerServer:
    """The runner: a grpc.aio server with the Runner service, health and token auth.

    Use as ``async with RunnerServer(config) as server: await server.start("127.0.0.1:0")``,
    or call :meth:`start` / :meth:`stop` yourself.
    """

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self._service = _RunnerService(config)
        self._health = HealthServicer()
        options = [
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        interceptors = [wire.BearerAuth(config.token), wire.RejectCorruptRequests(((REASON_KEY, "invalid"),))]
        self._server = grpc.aio.server(interceptors=interceptors, options=options)
        pb_grpc.add_RunnerServicer_to_server(self._service, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        wire.add_reflection(self._server, SERVICE_NAME)
        self.address: str | None = None

    async def start(self, listen: str, *, tls: TlsFiles | None = None) -> str:
        """Bind ``listen`` (``host:port``, port 0 picks one; or ``unix:PATH``) and serve.

        Returns the bound address (with the real port). Health turns SERVING here.

        Raises:
            RunnerError: the address cannot be bound or the TLS files cannot be read.
        """
        try:
            if tls is not None:
                credentials = grpc.ssl_server_credentials([(tls.key.read_bytes(), tls.cert.read_bytes())])
                port = self._server.add_secure_port(listen, credentials)
            else:
                port = self._server.add_insecure_port(listen)
        except (OSError, RuntimeError) as e:
            raise RunnerError(f"cannot listen on {listen}: {e}") from e
        if not listen.startswith("unix:") and port == 0:
            raise RunnerError(f"cannot listen on {listen}")
        await self._server.start()
        self._service.fence.start()
        if listen.startswith("unix:"):
            self.address = listen
        else:
            self.address = f"{listen.rsplit(':', 1)[0]}:{port}"
        for service in ("", SERVICE_NAME):
            await self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        return self.address

    @property
    def executions(self) -> int:
        """Executions running now."""
        return self._service.active

    async def stop(self, grace: float = 10.0) -> None:
        """Stop gracefully: NOT_SERVING at once, refuse new executions, let running ones
        finish for up to ``grace`` seconds, then cancel them (their streams end with a
        ``retryable`` error saying the runner stopped) and close the server."""
        self._service.accepting = False
        for service in ("", SERVICE_NAME):
            await self._health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        deadline = time.monotonic() + grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._service.idle.wait(), max(0.0, grace * 0.8))
        if self._service.active:
            _log.warning(
                "grace period ending: cancelling running executions", extra={"n": self._service.active}
            )
            for execution in list(self._service.executions.values()):
                if execution.task is not None:
                    execution.stopping = True
                    execution.task.cancel()
        remaining = max(0.1, deadline - time.monotonic())
        await self._server.stop(remaining)

    async def wait_for_termination(self) -> None:
        """Wait until the server stops."""
        await self._server.wait_for_termination()

    async def __aenter__(self) -> RunnerServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop(grace=1.0)

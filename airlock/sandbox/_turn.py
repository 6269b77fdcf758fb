"""What a sandboxed turn must be: describable as an AgentSpec (the runner rebuilds it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from layer0 import EnvError, ExitReason, Turn, TurnError, TurnInput, TurnMetadata, TurnOutput

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.spec import AgentSpec

    from ._events import SandboxEventSink
    from ._handle import TurnHandle


def agent_spec_of(turn: Turn) -> AgentSpec:
    """The AgentSpec a turn was built from (``airlock.build.build_turn``) or runs (``RemoteTurn``).

    Raises:
        EnvError: ``other`` when the turn carries none — its code cannot cross into a sandbox.
    """
    from airlock.spec import AgentSpec

    spec = getattr(turn, "spec", None)
    if not isinstance(spec, AgentSpec):
        raise EnvError.other(
            f"{type(turn).__name__} cannot run in a sandbox: the runner rebuilds the turn from its "
            "AgentSpec, and this turn has none (build it with build_turn(spec), or use a "
            "RemoteTurn)"
        )
    return spec


def hard_timeout_s(
    agent: AgentSpec, input: TurnInput, env_timeout: float | None, grace: float
) -> float | None:
    """Seconds after which the sandbox is killed: the turn's ``max_duration`` (its input's
    TurnConfig, else the AgentSpec defaults) plus ``grace``, capped by ``env_timeout``."""
    ms = agent.max_duration_for(input)
    limits = [t for t in (env_timeout, ms / 1000 + grace if ms is not None else None) if t is not None]
    return min(limits) if limits else None


def timeout_output(who: str, limit_s: float, elapsed_s: float) -> TurnOutput:
    """The output of a turn whose sandbox was killed at its deadline (exit reason timeout)."""
    return TurnOutput(
        message=f"{who} killed: the turn ran past its {limit_s:.1f}s limit",
        exit_reason=ExitReason.timeout(),
        metadata=TurnMetadata.empty().model_copy(update={"duration": int(elapsed_s * 1000)}),
    )


async def run_in_sandbox(
    who: str,
    remote: RemoteTurn,
    input: TurnInput,
    events: SandboxEventSink | None,
    timeout: float | None,  # noqa: ASYNC109
    *,
    stop: Callable[[], Awaitable[object]],
    failed: Callable[[TurnError], Awaitable[EnvError]],
    finished: Callable[[], Awaitable[None]],
    session: TurnHandle | None = None,
) -> TurnOutput:
    r"""A sandbox's turn through ``remote``, the same on every backend: past ``timeout`` the
    backend ``stop``\ s the sandbox and the output says timeout; a turn that fails becomes the
    EnvError ``failed`` makes of it (an OOM kill, a dead sandbox); after a turn that ended,
    ``finished`` raises what the sandbox went through meanwhile (an OOM kill). The channel is
    closed in every case. With ``session``, the turn continues from its snapshot (``resume``)
    and the handle's control calls reach it while it runs."""
    began = time.monotonic()
    if session is not None:
        remote.resume_from = session.resume_from
        remote.start_paused = session.start_paused
        session.attach(remote)
    try:
        if session is not None and session.files:
            await _put_files(who, remote, session.files)
        try:
            output = await asyncio.wait_for(remote.execute(input, events=events), timeout)
        except TimeoutError:
            await stop()
            elapsed = time.monotonic() - began
            return timeout_output(who, timeout or elapsed, elapsed)
        except TurnError as e:
            from airlock.runner import agent_refused, fence_breached

            why = agent_refused(e)
            if why is not None:  # the sandbox's image cannot run this agent
                raise EnvError.provision_failed(f"{who}: {why}") from e
            breached = fence_breached(e)
            if breached is not None:  # the sandbox reached what its policy must block
                raise EnvError.isolation_violation(f"{who}: {breached}") from e
            raise await failed(e) from e
        if session is not None and session.collect_artifacts:
            await _collect(remote, session)
    finally:
        if session is not None:
            session.detach(remote)
        await remote.close()
    await finished()
    return output


async def _put_files(who: str, remote: RemoteTurn, files: list[tuple[str, bytes]]) -> None:
    """The job's input files into the fresh workspace (a refusal fails the provisioning)."""
    from airlock.policy import FileRefused
    from airlock.runner import RunnerCallError

    try:
        await remote.put_files(files)
    except (FileRefused, RunnerCallError) as e:
        raise EnvError.provision_failed(f"{who}: cannot place the input files: {e}") from e


async def _collect(remote: RemoteTurn, session: TurnHandle) -> None:
    """The turn's artifacts onto ``session``; a refusal is recorded there, never a cut set."""
    from airlock.policy import FileRefused
    from airlock.runner import RunnerCallError

    try:
        session.artifacts = await remote.collect_artifacts()
    except (FileRefused, RunnerCallError) as e:
        session.artifacts_refused = str(e)

"""The one lifecycle of every backend's sandbox, written against :class:`~._instance.SandboxInstance`.

A backend provisions an instance its own way; :func:`start` waits until it is ready,
:func:`run_turn` binds the job (the backend's step), runs the turn with its deadline
(:func:`execute`) and tears the instance down (or hands the teardown to a warm pool). Past the
deadline the instance is stopped and the output says ``timeout``; a failed turn becomes what
the instance makes of it (an OOM kill, a dead box); after a turn that ended, what the box went
through meanwhile is raised (an OOM kill).

Provisioning runs shielded, so a cancel mid-create cannot lose track of what was created:
teardown first waits for the create (:func:`settle`), then removes everything. Teardown
itself runs to its end even when cancelled again (:func:`shielded`). An OOM kill inside is
the same ``resource_exceeded`` on every backend (:func:`oom_exceeded`), and a turn whose
channel broke is judged once the sandbox has had time to show how it ended (:data:`SETTLE_S`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from layer0 import EnvError, TurnError, TurnInput, TurnOutput

from ._instance import SandboxInstance
from ._limits import Limits
from ._turn import timeout_output

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.wire import WorkspaceOptions

    from ._events import SandboxEventSink
    from ._handle import TurnHandle, WorkspaceRestore

__all__ = ["SETTLE_S", "execute", "oom_exceeded", "run_turn", "settle", "shielded", "start"]

#: How long a sandbox whose runner's channel broke may take to show how it ended (a dying
#: gVisor kernel, an OOM kill its engine or kubelet reports once the sandbox has gone), before
#: the break counts as the channel's own.
SETTLE_S = 20.0


async def shielded(teardown: Callable[[], Awaitable[None]]) -> None:
    """Run ``teardown()`` to its end even if we are cancelled (again) meanwhile; the
    cancellation is re-raised once it is done."""
    task = asyncio.ensure_future(teardown())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


async def settle(inflight: asyncio.Future[Any] | None) -> None:
    """Wait for a provisioning step still in flight; its error was raised to the caller
    already, so it is only retrieved here."""
    if inflight is None:
        return
    await asyncio.wait([inflight])
    if not inflight.cancelled():
        inflight.exception()


def oom_exceeded(sandbox_id: str, limits: Limits | None) -> EnvError:
    """The error of a sandbox whose process was OOM-killed at its memory limit (None: one
    never provisioned with limits)."""
    limit = f"{limits.memory_bytes / 2**20:.0f}Mi" if limits is not None else "memory"
    return EnvError.resource_exceeded(
        f"memory: sandbox {sandbox_id} hit its {limit} limit (a process inside was OOM-killed)"
    )


async def start(instance: SandboxInstance, provision: Callable[[], Awaitable[None]]) -> None:
    """``provision()`` (the backend's own step), then wait until ``instance`` is ready; it is
    torn down when either fails (or is cancelled)."""
    try:
        await provision()
        await instance.wait_ready()
    except BaseException:
        await instance.teardown()
        raise


async def run_turn(
    instance: SandboxInstance,
    input: TurnInput,
    events: SandboxEventSink | None,
    deadline: float | None,
    handle: TurnHandle | None = None,
    *,
    bind: Callable[[], Awaitable[None]],
    retire: Callable[[Awaitable[None]], None] | None = None,
) -> TurnOutput:
    """A ready ``instance``'s turn: ``bind()`` gives it its job (the backend's step), then
    :func:`execute`; the instance is torn down before this returns, or, after a turn that
    ended, its teardown is handed to ``retire`` (a warm pool finishes it in the background)."""
    try:
        await bind()
        output = await execute(instance, input, events, deadline, handle)
    except BaseException:
        await instance.teardown()
        raise
    if retire is None:
        await instance.teardown()
    else:
        retire(instance.teardown())
    return output


async def execute(
    instance: SandboxInstance,
    input: TurnInput,
    events: SandboxEventSink | None,
    timeout: float | None,  # noqa: ASYNC109
    handle: TurnHandle | None = None,
) -> TurnOutput:
    r"""The turn over ``instance``'s channel, the same on every backend: past ``timeout`` the
    instance is stopped and the output says timeout; a turn that fails becomes the EnvError
    the instance makes of it; after a turn that ended, the instance raises what it went
    through meanwhile. The channel is closed in every case. With ``handle``, the turn
    continues from its snapshot (``resume``) and the handle's control calls reach it while
    it runs."""
    remote, who = instance.remote, instance.name
    assert remote is not None, "bind a job first"
    began = time.monotonic()
    if handle is not None:
        remote.resume_from = handle.resume_from
        remote.start_paused = handle.start_paused
        remote.workspace = _snapshot_options(handle)
        handle.attach(remote)
    try:
        if handle is not None and handle.restore is not None:
            await _restore(who, remote, handle.restore)
        if handle is not None and handle.files:
            await _put_files(who, remote, handle.files)
        try:
            output = await asyncio.wait_for(remote.execute(input, events=events), timeout)
        except TimeoutError:
            await instance.stop()
            elapsed = time.monotonic() - began
            return timeout_output(who, timeout or elapsed, elapsed)
        except TurnError as e:
            raise await _failure(instance, e) from e
        if handle is not None and handle.collect_artifacts:
            await _collect(remote, handle)
    finally:
        if handle is not None:
            handle.detach(remote)
        await remote.close()
    await instance.after_turn()
    return output


async def _failure(instance: SandboxInstance, e: TurnError) -> EnvError:
    """The EnvError of a failed turn: the image refusing the agent, a fence breached, else
    what the instance makes of it."""
    from airlock.runner import agent_refused, fence_breached

    why = agent_refused(e)
    if why is not None:  # the sandbox's image cannot run this agent
        return EnvError.provision_failed(f"{instance.name}: {why}")
    breached = fence_breached(e)
    if breached is not None:  # the sandbox reached what its policy must block
        return EnvError.isolation_violation(f"{instance.name}: {breached}")
    return await instance.failure(e)


async def _put_files(who: str, remote: RemoteTurn, files: list[tuple[str, bytes]]) -> None:
    """The job's input files into the fresh workspace (a refusal fails the provisioning)."""
    from airlock.policy import FileRefused
    from airlock.runner import RunnerCallError

    try:
        await remote.put_files(files)
    except (FileRefused, RunnerCallError) as e:
        raise EnvError.provision_failed(f"{who}: cannot place the input files: {e}") from e


def _snapshot_options(handle: TurnHandle) -> WorkspaceOptions | None:
    """The snapshots ``handle`` asks for, against the restored manifest, else the one the
    caller holds, else the empty one."""
    from airlock.policy import EMPTY_MANIFEST
    from airlock.wire import WorkspaceOptions

    if handle.snapshot_bytes is None:
        return None
    base = handle.restore.manifest if handle.restore is not None else handle.workspace_base or EMPTY_MANIFEST
    return WorkspaceOptions(max_bytes=handle.snapshot_bytes, base=base.digest)


async def _restore(who: str, remote: RemoteTurn, restore: WorkspaceRestore) -> None:
    """The workspace restored before the turn; the runner must report the manifest's digest
    back (anything else fails the provisioning)."""
    from airlock.policy import FileRefused
    from airlock.runner import RunnerCallError

    want = restore.manifest.digest
    try:
        got = await remote.restore_workspace(restore.manifest, restore.read)
    except (FileRefused, RunnerCallError) as e:
        raise EnvError.provision_failed(f"{who}: cannot restore the workspace: {e}") from e
    if got != want:
        raise EnvError.provision_failed(
            f"{who}: the restored workspace is {got or 'unnamed'}, not the checkpoint's {want}"
        )


async def _collect(remote: RemoteTurn, handle: TurnHandle) -> None:
    """The turn's artifacts onto ``handle``; a refusal is recorded there, never a cut set."""
    from airlock.policy import FileRefused
    from airlock.runner import RunnerCallError

    try:
        handle.artifacts = await remote.collect_artifacts()
    except (FileRefused, RunnerCallError) as e:
        handle.artifacts_refused = str(e)

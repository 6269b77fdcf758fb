"""A hostile agent in a real sandbox: it runs bash commands chosen by the test (the agent's
own tool), and the test gets back every tool result, the turn's output or error, and the
events, for the adversarial suite."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock.build import build_turn
from airlock.policy import EnvSecretResolver
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from airlock.spec import AgentSpec
from airlock.testing import bash_agent, scripted_agent, text_step, tool_step
from airlock.turn import ToolFinished
from layer0 import EnvError, EnvironmentSpec, TurnInput, TurnOutput


@dataclass
class Hostile:
    """What one hostile turn produced."""

    results: list[dict[str, Any]] = field(default_factory=list)
    output: TurnOutput | None = None
    error: EnvError | None = None
    events: list[Any] = field(default_factory=list)
    logs: str = ""

    def json(self, index: int = 0) -> dict[str, Any]:
        """The JSON a probe printed as the stdout of tool call ``index``."""
        result = self.results[index]
        try:
            found: dict[str, Any] = json.loads(result["stdout"])
        except (KeyError, ValueError) as e:
            raise AssertionError(f"probe {index} printed no JSON: {result}") from e
        return found

    def everything(self) -> str:
        """Output, error and events as one text (to search for leaks)."""
        parts = [repr(e) for e in self.events]
        if self.output is not None:
            parts.append(self.output.model_dump_json())
        if self.error is not None:
            parts.append(str(self.error))
        return "\n".join(parts)


def isolation_settings(isolation: str) -> DockerSettings:
    """The Docker backend's settings that put every sandbox behind ``isolation``."""
    return DockerSettings(isolation_floor="gvisor" if isolation == "gvisor" else "container")


async def run_hostile_async(
    commands: Sequence[str | Mapping[str, Any]],
    *,
    isolation: str,
    image: str,
    spec: EnvironmentSpec | None = None,
    secrets: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    watch: Callable[[Any], Awaitable[None]] | None = None,
    run_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> Hostile:
    """Run one turn whose agent runs ``commands`` with bash, in a fresh sandbox.

    ``watch`` sees each event as it arrives (while the sandbox lives); ``run_options`` go to
    ``DockerEnvironment.run`` (e.g. ``sidecar_routes``), ``options`` to its constructor. The
    controller side's log records (every logger, DEBUG and up) are kept in ``Hostile.logs``.
    """
    state, workspace = await asyncio.to_thread(_fresh_state, workdir)
    found = Hostile()

    async def sink(event: Any) -> None:
        found.events.append(event)
        if watch is not None:
            await watch(event)

    env = DockerEnvironment(
        image=image,
        state_dir=state,
        sweep=False,
        settings=isolation_settings(isolation),
        secrets=EnvSecretResolver(dict(secrets or {})),
        **options,
    )
    records = _Records()
    root = logging.getLogger()
    level = root.level
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        turn = build_turn(hostile_agent(commands), workspace=workspace)
        found.output = await env.run(
            turn, TurnInput.new("go"), spec or EnvironmentSpec(), events=sink, **dict(run_options or {})
        )
    except EnvError as e:
        found.error = e
    finally:
        root.removeHandler(records)
        root.setLevel(level)
        found.logs = "\n".join(records.lines)
        leftovers = await asyncio.to_thread(_remove_state, state)
    assert not leftovers, f"state left behind: {leftovers}"
    found.results = [_result(e.output) for e in found.events if isinstance(e, ToolFinished)]
    return found


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.getMessage()} {record.__dict__}")


def _result(output: str) -> dict[str, Any]:
    """A bash result (JSON), or a failed call's error text as ``{"error": ...}``."""
    try:
        found = json.loads(output)
    except ValueError:
        return {"error": output, "stdout": "", "stderr": ""}
    return found if isinstance(found, dict) else {"error": output, "stdout": "", "stderr": ""}


def _fresh_state(workdir: Path | None) -> tuple[Path, Path]:
    state = Path(f"/tmp/al-adv-{os.getpid()}-{os.urandom(3).hex()}")  # a socket path fits 108 bytes
    state.mkdir(mode=0o755)
    workspace = (workdir or state) / "host-workspace"
    workspace.mkdir(exist_ok=True)
    return state, workspace


def _remove_state(state: Path) -> list[str]:
    """Remove the state directory; what the sandbox's teardown had left in it."""
    leftovers = sorted(p.name for p in state.iterdir() if p.name != "host-workspace")
    shutil.rmtree(state, ignore_errors=True)
    return leftovers


def hostile_agent(commands: Sequence[str | Mapping[str, Any]]) -> AgentSpec:
    """An agent that makes one bash call per command (a string, or the bash tool's whole
    input such as ``{"command": ..., "timeout_s": 5}``), then answers ``done``."""
    if all(isinstance(c, str) for c in commands):
        return bash_agent(*(str(c) for c in commands))
    steps = [
        tool_step("bash", {"command": c} if isinstance(c, str) else dict(c), id=f"t{i}")
        for i, c in enumerate(commands)
    ]
    return scripted_agent([*steps, text_step("done")], name="bash-agent", tools=["bash"])


def run_hostile(commands: Sequence[str | Mapping[str, Any]], **kw: Any) -> Hostile:
    """:func:`run_hostile_async` from synchronous code (module-scoped fixtures)."""
    return asyncio.run(run_hostile_async(commands, **kw))

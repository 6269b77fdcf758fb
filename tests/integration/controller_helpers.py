"""Scripted agents and an in-process controller for the controller-service tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airlock.config import load_config
from airlock.controller import (
    AgentRunner,
    Controller,
    ControllerClient,
    ControllerOptions,
    JobService,
    ServiceSettings,
    SqliteJobStore,
)
from airlock.state import SqliteStore


def tool_step(name: str, input: dict[str, Any], i: int = 0, **match: Any) -> dict[str, Any]:
    """A scripted model step that calls one tool."""
    step: dict[str, Any] = {
        "response": {
            "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": input}],
            "stop_reason": "tool_use",
        }
    }
    if match:
        step["match"] = match
    return step


def tools_step(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """A scripted model step that calls several tools at once, in order."""
    return {
        "response": {
            "content": [
                {"type": "tool_use", "id": f"t{i}", "name": name, "input": input}
                for i, (name, input) in enumerate(calls)
            ],
            "stop_reason": "tool_use",
        }
    }


def text_step(text: str, **match: Any) -> dict[str, Any]:
    """A scripted model step that answers ``text``."""
    step: dict[str, Any] = {
        "response": {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
    }
    if match:
        step["match"] = match
    return step


def agent(steps: list[dict[str, Any]], tools: list[str], **sandbox: Any) -> dict[str, Any]:
    """A docker agent on the scripted provider."""
    return {
        "provider": {"kind": "scripted", "script": steps},
        "system": "test agent",
        "tools": tools,
        "backend": "docker",
        "resources": sandbox.pop("resources", {"cpu": "1", "memory": "256Mi"}),
        "defaults": sandbox.pop("defaults", {"max_turns": 6, "max_duration": "60s"}),
        **sandbox,
    }


def write_config(directory: Path, agents: dict[str, dict[str, Any]]) -> Path:
    """An airlock.yaml (JSON is YAML) defining ``agents``."""
    path = directory / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": agents}, indent=2))
    return path


@contextlib.asynccontextmanager
async def running_controller(
    config: Path,
    data_dir: Path,
    sandbox_dir: Path,
    image: str,
    **settings: Any,
) -> AsyncIterator[tuple[Controller, ControllerClient]]:
    """A Controller on a free loopback port and a client holding its token."""
    options = ControllerOptions(
        data_dir=data_dir,
        address="127.0.0.1:0",
        settings=ServiceSettings(**settings),
        sandbox_dir=sandbox_dir,
        image=image,
    )
    async with Controller(load_config(config), options) as controller:
        client = ControllerClient(controller.address, controller.token)
        try:
            yield controller, client
        finally:
            await client.close()


@contextlib.asynccontextmanager
async def running_service(
    config: Path, data_dir: Path, sandbox_dir: Path, image: str, runner: type[AgentRunner] = AgentRunner
) -> AsyncIterator[JobService]:
    """A JobService (no gRPC server) over SQLite stores in ``data_dir``, running turns with
    ``runner`` (an AgentRunner subclass, e.g. one that tampers with what a sandbox returns)."""
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    async with (
        SqliteJobStore(data_dir / "jobs.db") as store,
        SqliteStore(data_dir / "state.db") as state,
    ):
        turns = runner(load_config(config), state_dir=sandbox_dir, image=image, workspace=data_dir)
        async with JobService(store, turns, state) as service:
            yield service


def tool_outputs(events: list[Any], name: str = "bash") -> list[str]:
    """What the finished ``name`` tool calls among a job's events printed (bash: stdout)."""
    outputs = [
        e.data["output"]
        for e in events
        if e.kind == "turn" and e.data.get("type") == "tool_finished" and e.data.get("name") == name
    ]
    return [json.loads(o)["stdout"] if name == "bash" else o for o in outputs]

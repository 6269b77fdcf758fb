"""An HTTP API under test: the real app (:func:`airlock.web.create_app`) served by the real
:class:`~airlock.web.WebServer` (uvicorn on loopback, this loop) over a real JobService and
SQLite stores, principals by token (:mod:`tests.support.principals`), an httpx client per
caller."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.identity import Principal, RoleBook
from airlock.jobs import Job
from airlock.state import SqliteStore
from airlock.testing import text_step
from airlock.web import WebServer, create_app
from layer0 import TurnInput
from tests.support.principals import Principals, principal, token_of

#: ``a-only`` submits to agent ``a`` and nothing else.
AUTH: dict[str, Any] = {
    "roles": {"a-only": {"grants": ["submitter"], "agents": ["a"]}},
    "tenants": {"red": {}, "blue": {}},
}
TENANTS = {"alice": "red", "carol": "red", "dave": "red", "erin": "red", "bob": "blue"}


def people(book: RoleBook) -> list[Principal]:
    """alice and bob: full members of red and blue; carol: red's viewer; dave: red, may submit
    to ``a`` only; erin: red's approver and nothing else; root: the administrator."""
    return [
        principal("alice", "submitter", "viewer", "approver", tenant="red", book=book),
        principal("bob", "submitter", "viewer", "approver", tenant="blue", book=book),
        principal("carol", "viewer", tenant="red", book=book),
        principal("dave", "a-only", tenant="red", book=book),
        principal("erin", "approver", tenant="red", book=book),
        principal("root", "admin", book=book),
    ]


def token(name: str) -> str:
    return token_of(name, TENANTS.get(name, "default"))


def process_agent(steps: list[dict[str, Any]], tools: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    return {
        "provider": {"kind": "scripted", "script": steps},
        "tools": list(tools),
        "backend": "process",
        "defaults": {"max_turns": 8, "max_duration": "60s"},
        **extra,
    }


@dataclass
class World:
    """The server's URL, its service and store, and the tenants' first jobs."""

    url: str
    app: FastAPI
    service: JobService
    store: SqliteJobStore
    red: Job
    blue: Job

    def client(self, caller: str | None = None) -> httpx.AsyncClient:
        """A client authenticated as ``caller`` by bearer token (None: no credential)."""
        headers = {"Authorization": f"Bearer {token(caller)}"} if caller else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)


@contextlib.asynccontextmanager
async def world(
    tmp_path: Path, agents: dict[str, dict[str, Any]] | None = None, *, workers: bool = False, **options: Any
) -> AsyncIterator[World]:
    """The API over agents ``a`` and ``ops`` (default: scripts that say nothing); with
    ``workers``, jobs run (on the process backend), else they stay queued; ``options``: more
    arguments of :func:`create_app`."""
    quiet = process_agent([text_step("nothing")])
    config_file = tmp_path / "airlock.yaml"
    config_file.write_text(
        json.dumps({"version": 1, "agents": agents or {"a": quiet, "ops": quiet}, "auth": AUTH})
    )
    config = load_config(config_file)
    book = RoleBook(config.auth.roles)
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
    ):
        service = JobService(store, AgentRunner(config), state, auth=config.auth)
        async with contextlib.AsyncExitStack() as stack:
            if workers:
                await stack.enter_async_context(service)
            app = create_app(service, Principals(*people(book)), record=store.record_audit, **options)
            web = await stack.enter_async_context(WebServer(app, "127.0.0.1:0"))
            red = await service.submit("a", TurnInput.new("the red secret"), tenant="red", owner="alice")
            blue = await service.submit("a", TurnInput.new("the blue plan"), tenant="blue", owner="bob")
            yield World(web.url, app, service, store, red, blue)

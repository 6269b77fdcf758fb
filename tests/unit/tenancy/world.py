"""A controller of several tenants for the tenancy suites: a real ControllerServer (real gRPC
on loopback) over a real JobService and SQLite stores, not started (jobs stay queued), with a
token per principal (:mod:`tests.support.principals`) and a real API key store."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml

from airlock._proto.controller.v1 import controller_pb2_grpc as cpb_grpc
from airlock.config import AgentConfig, load_config
from airlock.controller import AgentRunner, ControllerServer, IdentityApi, JobService, SqliteJobStore
from airlock.controller import _store_sandboxes as sandbox_rows
from airlock.controller._sandboxes import spec_digest
from airlock.identity import KeyStore, Principal, RoleBook
from airlock.jobs import Job, SandboxInfo, utcnow
from airlock.state import SqliteStore
from layer0 import TurnInput
from tests.support.principals import Principals, principal, token_of

#: Two agents; ``a-only`` submits to ``a`` and nothing else.
AUTH: dict[str, Any] = {
    "roles": {"a-only": {"grants": ["submitter"], "agents": ["a"]}},
    "tenants": {"red": {}, "blue": {}},
}


def config_text(auth: dict[str, Any]) -> str:
    agent = {"provider": {"kind": "scripted", "script": "s.yaml"}, "backend": "process"}
    return yaml.safe_dump({"version": 1, "agents": {"a": agent, "ops": agent}, "auth": auth})


def people(book: RoleBook) -> list[Principal]:
    """alice and bob: full members of red and blue; carol: red's viewer; dave: red, may
    submit to ``a`` only; zed: a submitter of carl (which holds no job); root: the
    administrator."""
    return [
        principal("alice", "submitter", "viewer", "approver", tenant="red", book=book),
        principal("bob", "submitter", "viewer", "approver", tenant="blue", book=book),
        principal("carol", "viewer", tenant="red", book=book),
        principal("dave", "a-only", tenant="red", book=book),
        principal("zed", "submitter", tenant="carl", book=book),
        principal("root", "admin", book=book),
    ]


@dataclass
class World:
    """The server, its service and the tenants' first jobs."""

    address: str
    service: JobService
    store: SqliteJobStore
    keys: KeyStore
    red: Job
    blue: Job
    #: A long-lived sandbox of red's (alice's), its row only (no box).
    red_sandbox: SandboxInfo

    def token(self, name: str) -> str:
        tenant = {"alice": "red", "carol": "red", "dave": "red", "bob": "blue", "zed": "carl"}.get(
            name, "default"
        )
        return token_of(name, tenant)

    async def call(self, caller: str | None, method: str, request: Any) -> Any:
        """``method`` as ``caller`` (None: no credential); a stream is read to its end."""
        metadata = (("authorization", f"Bearer {self.token(caller)}"),) if caller else ()
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = cpb_grpc.ControllerStub(channel)
            answer = getattr(stub, method)(request, metadata=metadata, timeout=10)
            if hasattr(answer, "__aiter__"):
                return [item async for item in answer]
            return await answer

    async def refused(self, caller: str | None, method: str, request: Any) -> grpc.aio.AioRpcError:
        """The error ``method`` ends with (it must end with one)."""
        try:
            await self.call(caller, method, request)
        except grpc.aio.AioRpcError as e:
            return e
        raise AssertionError(f"{method} as {caller} was not refused")


@contextlib.asynccontextmanager
async def world(tmp_path: Path, auth: dict[str, Any] | None = None) -> AsyncIterator[World]:
    (tmp_path / "s.yaml").write_text("steps: []\n")
    (tmp_path / "airlock.yaml").write_text(config_text(auth or AUTH))
    config = load_config(tmp_path / "airlock.yaml")
    book = RoleBook(config.auth.roles)
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        KeyStore(tmp_path / "keys.db", book) as keys,
    ):
        service = JobService(store, AgentRunner(config), state, auth=config.auth)  # no workers
        identity = IdentityApi(keys, config.auth, service.quotas, store)
        server = ControllerServer(
            service, "bootstrap", "127.0.0.1:0", authenticator=Principals(*people(book)), identity=identity
        )
        async with server:
            red = await submit(service, "red", "alice", "the red secret")
            blue = await submit(service, "blue", "bob", "the blue plan")
            await store.save_artifacts(red.id, [("out/r.txt", b"red")])
            sandbox = await red_sandbox(store, config.agent("a"))
            assert server.address is not None
            yield World(server.address, service, store, keys, red, blue, sandbox)


async def red_sandbox(store: SqliteJobStore, agent: AgentConfig) -> SandboxInfo:
    """A paused sandbox of red's agent ``a`` created by alice (its row: no box is started)."""
    now = utcnow()
    info = SandboxInfo(
        id="sbx-red0000000000000",
        agent=agent.name,
        tenant="red",
        owner="alice",
        state="paused",
        created_at=now,
        last_used_at=now,
        spec_digest=spec_digest(agent),
    )
    await store.run(sandbox_rows.insert(info, "test"))
    return info


def submit(service: JobService, tenant: str, owner: str, message: str) -> Awaitable[Job]:
    return service.submit("a", TurnInput.new(message), tenant=tenant, owner=owner, workflow="shared")


Refusal = Callable[[str], Any]

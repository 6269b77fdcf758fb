"""Controller: the job store, state store, runner, scheduler and gRPC server, assembled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Self

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic_core import to_jsonable_python

from airlock.errors import ConfigError
from airlock.jobs import DEFAULT_ADDRESS, default_data_dir
from airlock.tracing import JobTracing

from ._authn import open_identity
from ._blobs import BlobStore
from ._blobs_open import open_blob_store
from ._data_dir import open_data_dir
from ._execute import AgentRunner
from ._grpc import ControllerServer, load_or_create_token
from ._grpc_identity import IdentityApi
from ._observer import controller_observer
from ._service import CHANNELS, JobService
from ._service_settings import ServiceSettings
from ._store import JobStore
from ._stores import open_stores
from ._tls import ServerTls
from ._token_file import TokenFile
from ._weaving import AUDIT_KEY_FILE, load_or_create_audit_key, read_audit_key_file

if TYPE_CHECKING:
    from airlock.config import AirlockConfig
    from airlock.identity import Authenticator

_log = logging.getLogger("airlock.controller")


@dataclass(frozen=True)
class ControllerOptions:
    """Where the controller keeps its data, where it listens, and how it schedules.

    Attributes:
        data_dir: ``jobs.db`` (the job store), ``state.db`` (memory, session histories and
            turn records), ``keys.db`` (API keys, hashed), ``token`` (the bootstrap
            administrator's token) and ``audit.key`` (which seals the turn records) live
            here, private to the user (see :func:`open_data_dir`).
        address: ``host:port`` (``:0`` picks a port) or ``unix:/path``.
        token: the bearer token; None: read ``data_dir/token``, generating it if absent.
        token_file: a file holding the token (a mounted Secret), over ``token``: read at start
            and again whenever it changes, so a rotated token takes effect without a restart.
        settings: concurrency and limits.
        sandbox_dir: sandboxes' control directories (default: the backend's).
        image: the runner image (default: the current build).
        tls: serve the API with TLS (these files, followed as they rotate); None: plaintext.
        store: a PostgreSQL database (``postgresql://…``) for the jobs, the state and the API
            keys, which several controller replicas share; None: SQLite files in ``data_dir``.
        audit_key_file: the audit key in an existing file (a mounted Secret every replica
            shares, so each verifies the others' records), instead of ``data_dir/audit.key``.
        blob_store: where jobs' workspace snapshots keep their files: ``dir`` (``data_dir/blobs``),
            ``dir:PATH``, ``s3://bucket/prefix``, or ``off`` (none kept).
    """

    data_dir: Path | None = None
    address: str = DEFAULT_ADDRESS
    token: str | None = None
    token_file: Path | None = None
    settings: ServiceSettings = field(default_factory=ServiceSettings)
    sandbox_dir: Path | None = None
    image: str | None = None
    tls: ServerTls | None = None
    store: str | None = None
    audit_key_file: Path | None = None
    blob_store: str = "dir"


class Controller:
    """``airlock serve`` as an object: ``async with Controller(config, options) as c: ...``.

    On entry the stores open, jobs of a previous controller are recovered (running ones
    interrupted and their sandboxes reaped, queued ones queued again), the workers start and
    the server listens. On exit the server stops, running jobs are cancelled (sandboxes
    removed) and marked interrupted, and the stores close.
    """

    def __init__(self, config: AirlockConfig, options: ControllerOptions | None = None) -> None:
        self.config = config
        self.options = options or ControllerOptions()
        self.data_dir = (self.options.data_dir or default_data_dir()).absolute()
        self.token_created = False
        #: The bearer token clients must send (known after entry; never logged).
        self.token = ""
        self.service: JobService | None = None
        #: Where the records are (a data dir, or a PostgreSQL database without its password).
        self.store_where = str(self.data_dir)
        self.server: ControllerServer | None = None
        #: Checks a caller's credential (after entry): the gRPC API's, which the HTTP API shares.
        self.authenticator: Authenticator | None = None
        self._stack = contextlib.AsyncExitStack()
        self._derive_from: bytes | None = None

    @property
    def address(self) -> str:
        """Where the server listens (after entry)."""
        assert self.server is not None and self.server.address is not None, "not started"
        return self.server.address

    @property
    def token_file(self) -> Path:
        """The token file in the data directory."""
        return self.data_dir / "token"

    async def __aenter__(self) -> Self:
        try:
            await asyncio.to_thread(open_data_dir, self.data_dir)
            check = await self._token_check()
            self.token = check if isinstance(check, str) else check.token
            stores = await open_stores(self._stack, self.data_dir, self.options.store)
            store, self.store_where = stores.jobs, stores.where
            runner = AgentRunner(self.config, state_dir=self.options.sandbox_dir, image=self.options.image)
            key = await asyncio.to_thread(self._audit_key)
            self._derive_from = key
            auth = self.config.auth
            blobs = await self._blobs()
            tracing = JobTracing.from_env()  # OTLP when the OTEL_* variables ask; flushed last
            self._stack.push_async_callback(asyncio.to_thread, tracing.shutdown)
            self.service = await self._stack.enter_async_context(
                JobService(
                    store,
                    runner,
                    stores.state,
                    self.options.settings,
                    audit_key=key,
                    auth=auth,
                    tracing=tracing,
                    blobs=blobs,
                )
            )
            if stores.db is not None:  # other replicas' queued jobs and events, as they land
                listening = asyncio.create_task(stores.db.listen(CHANNELS, self.service.notified))
                self._stack.push_async_callback(_cancelled, listening)
            await _audit_quotas(store, self.config)
            keys, callers = await open_identity(self._stack, auth, self.data_dir, check, db=stores.db)
            self.authenticator = callers
            self.server = await self._stack.enter_async_context(
                ControllerServer(
                    self.service,
                    check,
                    self.options.address,
                    authenticator=callers,
                    identity=IdentityApi(keys, auth, self.service.quotas, store),
                    tls=self.options.tls,
                )
            )
            self._stack.push_async_callback(_cancelled, asyncio.create_task(_prove(runner)))
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    def derived_key(self, purpose: str) -> bytes:
        """A 32-byte key for ``purpose`` (e.g. sealing the console's logins), derived from the
        audit key with HKDF: the same after a restart and on every replica sharing the audit
        key, different for each purpose, and telling nothing of the audit key."""
        assert self._derive_from is not None, "not started"
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"airlock:{purpose}".encode())
        return hkdf.derive(self._derive_from)

    async def _blobs(self) -> BlobStore | None:
        """The blob store workspace snapshots keep their files in (closed last; None: off)."""
        spec = self.options.blob_store
        if spec == "off":
            return None
        try:
            blobs = await asyncio.to_thread(open_blob_store, spec, self.data_dir)
        except ValueError as e:
            raise ConfigError(f"--blob-store: {e}") from None
        self._stack.push_async_callback(blobs.aclose)
        return blobs

    def _audit_key(self) -> bytes:
        """The key the turn records are sealed with: the options' file, else the data dir's."""
        if self.options.audit_key_file is not None:
            return read_audit_key_file(self.options.audit_key_file)
        return load_or_create_audit_key(self.data_dir / AUDIT_KEY_FILE)

    async def _token_check(self) -> str | TokenFile:
        """What a client's token is checked against: the options' token file (followed), the
        options' token, or the data directory's token file (generated if absent).

        Raises:
            ControllerServerError: a token file is missing, unreadable or empty.
        """
        if self.options.token_file is not None:
            return await asyncio.to_thread(TokenFile, self.options.token_file)
        if self.options.token is not None:
            return self.options.token
        token, self.token_created = load_or_create_token(self.token_file)
        return token

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def wait_for_termination(self) -> None:
        """Serve until the server stops."""
        assert self.server is not None, "not started"
        await self.server.wait_for_termination()


async def _audit_quotas(store: JobStore, config: AirlockConfig) -> None:
    """Record the tenants' quotas in the audit log when they differ from the last recorded
    (quotas change by editing ``auth:``; the entry names the file)."""
    auth = config.auth
    quotas = {
        "default_quotas": auth.default_quotas,
        "tenants": {t: s.quotas for t, s in auth.tenants.items()},
    }
    text = json.dumps(to_jsonable_python(quotas), sort_keys=True)
    source = f"config:{config.files[0]}" if config.files else "config"
    if await store.audit_quotas(text, source) is not None:
        _log.info("tenant quotas changed: recorded in the audit log")


async def _prove(runner: AgentRunner) -> None:
    """Each backend's isolation proof, made at start before the first job needs it (a job
    still waits for it, and is refused while it fails)."""
    try:
        for proof in await runner.isolation_proofs():
            log = _log.info if proof.allows_jobs else _log.error
            controller_observer().isolation_proved(proof.backend, proof.status)
            log("isolation of %s in %r: %s (%s)", proof.backend, proof.scope, proof.status, proof.reason)
    except Exception:
        _log.exception("cannot prove the backends' isolation at start; each job proves it first")


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

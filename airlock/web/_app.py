"""The HTTP/JSON API as a FastAPI app over a JobService and an authenticator."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from airlock.controller import JobService
from airlock.jobs import MAX_MESSAGE_BYTES

from . import (
    _agents,
    _approvals,
    _artifacts,
    _egress,
    _errors,
    _events,
    _jobs,
    _login,
    _usage,
    _weave,
    console,
)
from ._audit import Record
from ._auth import Authenticated, CallerCheck, Gate
from ._limits import BodyLimit
from ._logins import LoginBook
from ._openapi import document_security

#: Where the OpenAPI document is served.
OPENAPI_URL = "/api/v1/openapi.json"
#: What answers without a credential: health, the OpenAPI document, the login form's target.
PUBLIC = ("/api/v1/health", OPENAPI_URL, "/login")
#: The console's script and style (nothing secret): the login page needs them.
STATIC = "/static"


def create_app(
    service: JobService,
    authenticator: CallerCheck,
    *,
    record: Record | None = None,
    mounts: Mapping[str, ASGIApp] | None = None,
    public_mounts: Mapping[str, ASGIApp] | None = None,
    max_body: int = MAX_MESSAGE_BYTES,
    logins: LoginBook | None = None,
) -> FastAPI:
    """The API of ``service``, its callers checked by ``authenticator`` (the gRPC API's).

    Args:
        record: writes the audit entry of each state-changing request (the job store's
            ``record_audit``); None: nothing is audited.
        mounts: other ASGI apps by path, mounted after the API's routes, behind the same
            authentication (``{"/metrics": metrics_app()}``; the console later at ``/``).
        public_mounts: as ``mounts``, but open to requests without a credential.
        max_body: the largest request body (413 beyond it).
        logins: the console logins (default: a new, empty book).
    """
    app = FastAPI(
        title="airlock controller API",
        version="1",
        openapi_url=OPENAPI_URL,
        docs_url=None,  # the docs pages load assets from outside the machine
        redoc_url=None,
    )
    if any(path.strip("/") == "" for path in public_mounts or {}):
        raise ValueError("a public mount at / would open every route: mount it behind authentication")
    app.state.service = service
    gate = Gate(authenticator, logins or LoginBook())
    app.state.gate = gate
    app.state.record = record
    _errors.install(app)
    for module in (_login, _jobs, _events, _egress, _approvals, _artifacts, _agents, _usage, _weave):
        app.include_router(module.router)
    app.include_router(console.router)
    app.mount(STATIC, StaticFiles(directory=console.STATIC_DIR))
    for path, mounted in {**(mounts or {}), **(public_mounts or {})}.items():
        # The path itself too (a mount alone answers it with a redirect to ``path/``).
        app.router.routes.append(Route(path.rstrip("/"), _Whole(mounted), include_in_schema=False))
        app.mount(path, mounted)
    app.add_middleware(BodyLimit, limit=max_body)
    public = [*PUBLIC, STATIC, *(public_mounts or {})]
    app.add_middleware(Authenticated, gate=gate, public=public)  # outermost: first
    document_security(app, PUBLIC)
    return app


class _Whole:
    """An ASGI app as a route's endpoint (a plain function would be taken for a request handler)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

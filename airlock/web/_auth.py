"""Who calls the HTTP API: ``Authorization: Bearer <token|API key|OIDC JWT>`` through the
controller's authenticator (the gRPC API's), or a console login cookie whose state-changing
requests must echo the login's CSRF token in ``X-CSRF-Token``. A request with neither, or
with a credential that does not check out, is 401 and learns nothing else."""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Annotated, Protocol

from fastapi import Depends, Request
from fastapi.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from airlock.identity import FailureThrottle, KeyStoreError, Principal, Unauthenticated

from ._errors import ApiError, error_response
from ._logins import LoginBook

_log = logging.getLogger("airlock.web")

LOGIN_COOKIE = "airlock_login"
CSRF_COOKIE = "airlock_csrf"
CSRF_HEADER = "X-CSRF-Token"
#: Methods that change nothing: no CSRF token needed.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CallerCheck(Protocol):
    """What checks a credential (:class:`airlock.identity.Authenticator`, or a test double)."""

    async def authenticate(self, authorization: str) -> Principal:
        """The principal ``authorization`` (``Bearer …``) proves; raises Unauthenticated."""
        ...


def unauthenticated() -> ApiError:
    """The one 401: it says nothing of why."""
    return ApiError(401, "UNAUTHENTICATED", "authentication required")


@dataclass(frozen=True)
class Gate:
    """Authenticates requests (bearer or login cookie) for the routes."""

    check: CallerCheck
    logins: LoginBook
    throttle: FailureThrottle = field(default_factory=FailureThrottle)

    async def principal(self, request: Request) -> Principal:
        """The caller of ``request``.

        Raises:
            ApiError: 401 (no or bad credential), 403 ``CSRF_FAILED`` (a cookie-authenticated
                state-changing request without its CSRF token), 503 (keys unreadable now).
        """
        header = request.headers.get("authorization")
        if header is not None:
            return await self.authenticate(header, request)
        login = self.logins.find(request.cookies.get(LOGIN_COOKIE, ""))
        if login is None:
            raise unauthenticated()
        if request.method not in SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), login.csrf.encode()):
                raise ApiError(403, "CSRF_FAILED", f"missing or wrong {CSRF_HEADER} header")
        return await self.authenticate(f"Bearer {login.credential}", request)

    async def authenticate(self, authorization: str, request: Request) -> Principal:
        """The principal of ``authorization`` (raises as :meth:`principal`, and 429 ``THROTTLED``
        while the peer has failed too often lately)."""
        peer = request.client.host if request.client else "?"
        wait = self.throttle.wait(peer)
        if wait:
            message = "too many failed authentications from this address; try again later"
            raise ApiError(429, "THROTTLED", message, retry_after=math.ceil(wait))
        try:
            return await self.check.authenticate(authorization)
        except Unauthenticated as e:
            self.throttle.failed(peer)
            _log.warning("rejected %s %s: %s (peer %s)", request.method, request.url.path, e.reason, peer)
            raise unauthenticated() from None
        except KeyStoreError as e:
            _log.error("cannot check the credential of %s %s: %s", request.method, request.url.path, e)
            raise ApiError(503, "UNAVAILABLE", "credentials cannot be checked now; try again") from None


class Authenticated:
    """ASGI middleware, outermost: every HTTP request but those under ``public`` prefixes is
    authenticated before anything else looks at it (its body, its route), so an
    unauthenticated request is a 401 whatever else is wrong with it. The principal is left in
    the request's state for :data:`Caller`."""

    def __init__(self, app: ASGIApp, gate: Gate, public: Collection[str]) -> None:
        self.app = app
        self.gate = gate
        self.public = tuple(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _under(scope["path"], self.public):
            await self.app(scope, receive, send)
            return
        try:
            principal = await self.gate.principal(Request(scope))
        except ApiError as e:
            request = Request(scope)
            if e.status == 401 and _console_page(request):  # a person: to the login form
                await RedirectResponse("/login", status_code=303)(scope, receive, send)
                return
            await error_response(e)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def _console_page(request: Request) -> bool:
    path = request.url.path
    html = "text/html" in request.headers.get("accept", "")
    return html and request.method == "GET" and not path.startswith(("/api/", "/metrics"))


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def _caller(request: Request) -> Principal:
    principal: Principal = request.state.principal
    return principal


#: A route's authenticated principal.
Caller = Annotated[Principal, Depends(_caller)]

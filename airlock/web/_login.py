"""The console's login (``POST /login``, form field ``token``: a token, API key or OIDC JWT),
logout, who am I, and health (the one route without a credential; it says nothing else)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Request, Response

from ._auth import CSRF_COOKIE, LOGIN_COOKIE, Caller, Gate
from ._errors import ApiError
from ._logins import LOGIN_TTL_S, LoginTooLarge

router = APIRouter(tags=["session"])


@router.get("/api/v1/health")
async def health() -> dict[str, str]:
    """``{"status": "ok"}`` while the server answers."""
    return {"status": "ok"}


@router.get("/api/v1/whoami")
async def whoami(principal: Caller) -> dict[str, Any]:
    """The authenticated principal."""
    return {"name": principal.name, "tenant": principal.tenant, "roles": list(principal.roles)}


@router.post("/login")
async def login(
    request: Request, response: Response, token: Annotated[str, Form(min_length=1)]
) -> dict[str, Any]:
    """Check ``token`` and open a login: an HttpOnly, SameSite=Strict cookie (Secure
    over TLS) and the CSRF token state-changing requests echo in ``X-CSRF-Token`` (also in a
    readable ``airlock_csrf`` cookie). A form posted from another site's page is refused (its
    ``Origin`` names another host): nobody is logged in as someone else behind their back."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise ApiError(403, "CROSS_ORIGIN", "a login from another site's page is refused")
    gate: Gate = request.app.state.gate
    principal = await gate.authenticate(f"Bearer {token.strip()}", request)
    try:
        login_id, login = gate.logins.open(token.strip())
    except LoginTooLarge as e:
        raise ApiError(422, "INVALID_ARGUMENT", f"token: {e}; send it in an Authorization header") from None
    secure = request.url.scheme == "https"
    age = int(LOGIN_TTL_S)
    response.set_cookie(
        LOGIN_COOKIE, login_id, max_age=age, httponly=True, samesite="strict", secure=secure, path="/"
    )
    response.set_cookie(
        CSRF_COOKIE, login.csrf, max_age=age, httponly=False, samesite="strict", secure=secure, path="/"
    )
    return {"name": principal.name, "tenant": principal.tenant, "csrf_token": login.csrf}


@router.post("/logout", status_code=204)
async def logout(request: Request, principal: Caller) -> Response:
    """End the login (a cookie request needs its CSRF token, as every state change)."""
    gate: Gate = request.app.state.gate
    gate.logins.close(request.cookies.get(LOGIN_COOKIE, ""))
    response = Response(status_code=204)
    response.delete_cookie(LOGIN_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
    return response

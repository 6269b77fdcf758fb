"""airlock.web: the controller's HTTP/JSON API beside gRPC (FastAPI on the controller's event
loop), with the gRPC API's authentication, permissions and tenant scoping.

::

    async with Controller(config, options) as controller:
        async with WebServer(controller_app(controller), "127.0.0.1:8480") as web:
            ...  # web.url + "/api/v1/openapi.json"

Routes under ``/api/v1``: health, whoami, jobs (list, show, submit, cancel, events as SSE,
artifacts), approvals, agents; ``/login`` and ``/logout`` for the console's login cookie.
Other ASGI apps mount beside them (``mounts={"/metrics": app}``).
"""

from __future__ import annotations

from ._app import OPENAPI_URL, create_app
from ._auth import CSRF_COOKIE, CSRF_HEADER, LOGIN_COOKIE, CallerCheck
from ._controller import controller_app
from ._logins import LoginBook
from ._server import DEFAULT_HTTP_ADDRESS, WebServer, WebServerError, WebTls

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "DEFAULT_HTTP_ADDRESS",
    "LOGIN_COOKIE",
    "OPENAPI_URL",
    "CallerCheck",
    "LoginBook",
    "WebServer",
    "WebServerError",
    "WebTls",
    "controller_app",
    "create_app",
]

"""The OpenAPI document's security: a bearer credential or the console's login cookie on every
operation but the public ones."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ._auth import LOGIN_COOKIE

_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "the controller's token, an API key or an OIDC JWT (as over gRPC)",
    },
    "login": {
        "type": "apiKey",
        "in": "cookie",
        "name": LOGIN_COOKIE,
        "description": "POST /login; state-changing requests also send X-CSRF-Token",
    },
}


def document_security(app: FastAPI, public: Collection[str]) -> None:
    """Make ``app``'s document state who may call each operation (``public`` paths: anyone)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = _SCHEMES
            schema["security"] = [{"bearer": []}, {"login": []}]
            for path, operations in schema.get("paths", {}).items():
                if path in public:
                    for operation in operations.values():
                        operation["security"] = []
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

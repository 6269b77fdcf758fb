"""The API of a started :class:`~airlock.controller.Controller`."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI
from starlette.types import ASGIApp

from airlock.controller import Controller

from ._app import create_app
from ._logins import LoginBook

#: What the console's login key is derived for (from the controller's audit key).
LOGIN_KEY_PURPOSE = "console-logins"


def controller_app(controller: Controller, *, mounts: Mapping[str, ASGIApp] | None = None) -> FastAPI:
    """The API of ``controller`` (entered): its service, its authenticator, its audit log."""
    assert controller.service is not None and controller.authenticator is not None, "not started"
    service = controller.service
    logins = LoginBook(controller.derived_key(LOGIN_KEY_PURPOSE))  # good after restarts, on every replica
    return create_app(
        service, controller.authenticator, record=service.store.record_audit, mounts=mounts, logins=logins
    )

"""The seams for what later mounts beside the API (``/metrics``, the console): a mounted ASGI
app is behind the API's authentication, a public one is not; and ``airlock serve``'s default
HTTP address, when in use, is skipped with a warning instead of stopping the controller."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

import airlock.web
from airlock.cli import _serve
from airlock.controller import JobService
from airlock.observability import Metrics
from airlock.web import create_app
from tests.support.principals import Principals

from .world import world

pytestmark = pytest.mark.timeout(60)


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("hello")(scope, receive, send)


async def test_a_mount_is_behind_authentication_and_a_public_mount_is_not(tmp_path: Path) -> None:
    async with world(tmp_path, mounts={"/metrics": hello}, public_mounts={"/open": hello}) as w:
        async with w.client() as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 401
            assert (await anonymous.get("/metrics/x")).status_code == 401
            assert (await anonymous.get("/open/x")).text == "hello"
        async with w.client("carol") as carol:
            assert (await carol.get("/metrics/x")).text == "hello"


async def test_the_default_http_address_in_use_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        monkeypatch.setattr(airlock.web, "DEFAULT_HTTP_ADDRESS", address)
        monkeypatch.setattr(airlock.web, "controller_app", lambda controller, mounts: hello)
        controller: Any = SimpleNamespace()
        async with _serve._http_api(controller, _serve.ServeOptions(address="127.0.0.1:0"), Metrics()) as web:
            assert web is None
        assert "no HTTP API" in capsys.readouterr().err
        with pytest.raises(airlock.web.WebServerError, match="cannot listen"):
            asked = _serve.ServeOptions(address="127.0.0.1:0", http_address=address)
            async with _serve._http_api(controller, asked, Metrics()):
                pass


def test_a_public_mount_at_the_root_is_refused() -> None:
    with pytest.raises(ValueError, match="would open every route"):
        create_app(cast(JobService, None), Principals(), public_mounts={"/": hello})

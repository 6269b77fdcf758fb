"""The console's login: an HttpOnly, SameSite=Strict cookie whose state-changing requests need
the login's CSRF token (missing or wrong: 403, nothing done); bearer requests need none."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airlock.web import CSRF_COOKIE, CSRF_HEADER, LOGIN_COOKIE, LoginBook
from airlock.web._logins import LoginTooLarge

from .world import World, token, world

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    async with world(tmp_path) as made:
        yield made


@contextlib.asynccontextmanager
async def logged_in(w: World, name: str) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A browser logged in as ``name`` (no Authorization header) and its CSRF token."""
    async with w.client() as client:
        response = await client.post("/login", data={"token": token(name)})
        assert response.status_code == 200, response.text
        yield client, response.json()["csrf_token"]


async def test_login_sets_an_httponly_samesite_strict_cookie(w: World) -> None:
    async with w.client() as browser:
        response = await browser.post("/login", data={"token": token("alice")})
    assert response.status_code == 200
    assert response.json()["name"] == "alice"
    cookies = {c.split("=", 1)[0]: c.lower() for c in response.headers.get_list("set-cookie")}
    assert "httponly" in cookies[LOGIN_COOKIE] and "samesite=strict" in cookies[LOGIN_COOKIE]
    assert "httponly" not in cookies[CSRF_COOKIE] and "samesite=strict" in cookies[CSRF_COOKIE]
    assert "secure" not in cookies[LOGIN_COOKIE], "plain HTTP on loopback: a Secure cookie would not return"
    assert token("alice") not in response.text


async def test_a_login_posted_from_another_sites_page_is_refused(w: World) -> None:
    async with w.client() as browser:
        elsewhere = await browser.post(
            "/login", data={"token": token("alice")}, headers={"Origin": "https://evil.test"}
        )
        assert elsewhere.status_code == 403 and "set-cookie" not in elsewhere.headers
        here = await browser.post("/login", data={"token": token("alice")}, headers={"Origin": w.url})
        assert here.status_code == 200


@pytest.mark.parametrize("form", [{"token": "tok-red-mallory"}, {"token": ""}, {}])
async def test_a_bad_login_is_refused_and_sets_nothing(w: World, form: dict[str, str]) -> None:
    async with w.client() as browser:
        response = await browser.post("/login", data=form)
        assert response.status_code in (401, 422)
        assert "set-cookie" not in response.headers
        assert (await browser.get("/api/v1/jobs")).status_code == 401


async def test_the_cookie_reads_without_a_csrf_token(w: World) -> None:
    async with logged_in(w, "carol") as (browser, _):
        listed = await browser.get("/api/v1/jobs")
        assert listed.status_code == 200 and [j["id"] for j in listed.json()["jobs"]] == [w.red.id]
        assert (await browser.get("/api/v1/whoami")).json()["name"] == "carol"


@pytest.mark.parametrize("sent", [None, "", "wrong"])
async def test_a_cookie_state_change_without_its_csrf_token_is_refused(w: World, sent: str | None) -> None:
    headers = {CSRF_HEADER: sent} if sent is not None else {}
    async with logged_in(w, "alice") as (browser, _):
        cancel = await browser.post(f"/api/v1/jobs/{w.red.id}/cancel", headers=headers)
        submit = await browser.post("/api/v1/jobs", json={"agent": "a", "message": "hi"}, headers=headers)
        out = await browser.post("/logout", headers=headers)
    for response in (cancel, submit, out):
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "CSRF_FAILED"
    assert (await w.service.get(w.red.id)).state == "queued"
    assert len(await w.service.find()) == 2, "nothing submitted"


async def test_a_cookie_state_change_with_its_csrf_token_passes(w: World) -> None:
    async with logged_in(w, "alice") as (browser, csrf):
        assert browser.cookies[CSRF_COOKIE] == csrf  # double submit: the page reads it here
        cancel = await browser.post(f"/api/v1/jobs/{w.red.id}/cancel", headers={CSRF_HEADER: csrf})
        assert cancel.status_code == 200 and cancel.json()["state"] == "cancelled"


async def test_another_logins_csrf_token_does_not_pass(w: World) -> None:
    async with logged_in(w, "alice") as (alice, _), logged_in(w, "alice") as (_, other):
        response = await alice.post(f"/api/v1/jobs/{w.red.id}/cancel", headers={CSRF_HEADER: other})
    assert response.status_code == 403


async def test_bearer_requests_need_no_csrf_token(w: World) -> None:
    async with w.client("alice") as alice:
        response = await alice.post(f"/api/v1/jobs/{w.red.id}/cancel")
    assert response.status_code == 200


async def test_logout_ends_the_login(w: World) -> None:
    async with logged_in(w, "carol") as (browser, csrf):
        kept = browser.cookies[LOGIN_COOKIE]
        assert (await browser.post("/logout", headers={CSRF_HEADER: csrf})).status_code == 204
        assert (await browser.get("/api/v1/jobs")).status_code == 401
        browser.cookies.set(LOGIN_COOKIE, kept)
        replayed = await browser.get("/api/v1/jobs")
        assert replayed.status_code == 401, "the old cookie is dead server-side too"


async def test_a_login_is_good_on_every_server_sharing_its_key_and_no_other(tmp_path: Path) -> None:
    key = bytes(range(32))
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    async with (
        world(tmp_path / "a", logins=LoginBook(key)) as first,
        world(tmp_path / "b", logins=LoginBook(key)) as replica,
        world(tmp_path / "c", logins=LoginBook(bytes(32))) as stranger,
    ):
        async with first.client() as browser:
            assert (await browser.post("/login", data={"token": token("carol")})).status_code == 200
            cookies = dict(browser.cookies)
        async with httpx.AsyncClient(base_url=replica.url, cookies=cookies) as there:
            assert (await there.get("/api/v1/whoami")).json()["name"] == "carol"
        async with httpx.AsyncClient(base_url=stranger.url, cookies=cookies) as there:
            assert (await there.get("/api/v1/whoami")).status_code == 401


@pytest.mark.parametrize(
    "mangle", [lambda c: c[:-4] + "AAAA", lambda c: "A" + c[1:], lambda c: "", lambda c: "%%%"]
)
async def test_a_tampered_login_cookie_is_a_401(w: World, mangle: Any) -> None:
    async with logged_in(w, "carol") as (browser, _):
        cookie = browser.cookies[LOGIN_COOKIE]
        browser.cookies.set(LOGIN_COOKIE, mangle(cookie))
        assert (await browser.get("/api/v1/whoami")).status_code == 401


async def test_an_expired_login_is_a_401(tmp_path: Path) -> None:
    async with world(tmp_path, logins=LoginBook(ttl_s=-1)) as expired, expired.client() as browser:
        assert (await browser.post("/login", data={"token": token("carol")})).status_code == 200
        assert (await browser.get("/api/v1/whoami")).status_code == 401


def test_a_credential_too_long_for_a_cookie_is_refused_with_a_reason() -> None:
    with pytest.raises(LoginTooLarge, match="does not fit in a login cookie"):
        LoginBook().open("x" * 5000)


def test_the_cookie_holds_the_credential_only_sealed() -> None:
    cookie, login = LoginBook().open("tok-the-secret")
    assert "tok-the-secret" not in cookie and login.csrf not in cookie
    assert "tok-the-secret" not in base64.urlsafe_b64decode(cookie).decode("latin-1")

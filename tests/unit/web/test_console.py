"""The console's pages over HTTP: a Content-Security-Policy on each (no inline script), a
person without a login sent to the login form (the API still answers 401 and nothing else),
the script and style public, a job id from the URL escaped in the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from .world import world

PAGES = ["/", "/approvals", "/agents", "/jobs/some-job", "/jobs/some-job/weave"]
HTML = {"Accept": "text/html"}


@pytest.mark.parametrize("path", PAGES)
async def test_a_page_carries_a_csp_without_inline_script(tmp_path: Path, path: str) -> None:
    async with world(tmp_path) as w, w.client("alice") as alice:
        page = await alice.get(path, headers=HTML)
        assert page.status_code == 200, page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "<script>" not in page.text and 'src="/static/console.js"' in page.text


async def test_without_a_login_a_page_sends_a_person_to_the_login_form(tmp_path: Path) -> None:
    async with world(tmp_path) as w, w.client() as anonymous:
        page = await anonymous.get("/", headers=HTML)
        assert page.status_code == 303 and page.headers["location"] == "/login"
        assert (await anonymous.get("/")).status_code == 401  # not a browser: the 401
        assert (await anonymous.get("/api/v1/jobs", headers=HTML)).status_code == 401
        login = await anonymous.get("/login", headers=HTML)
        assert login.status_code == 200 and 'id="login-form"' in login.text
        script = await anonymous.get("/static/console.js")
        assert script.status_code == 200 and "textContent" in script.text
        assert "innerHTML" not in script.text
        assert (await anonymous.get("/static/console.css")).status_code == 200


async def test_a_job_id_in_the_url_is_escaped(tmp_path: Path) -> None:
    async with world(tmp_path) as w, w.client("alice") as alice:
        page = await alice.get("/jobs/%3Cscript%3Ealert(1)%22", headers=HTML)
        assert page.status_code == 200
        assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text

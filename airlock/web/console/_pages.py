"""The console's pages: each a shell the script fills from the API (``data-page`` says which)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

STATIC_DIR = Path(__file__).parent / "static"
#: Only this server's own script, style and images; no inline script, no framing.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
)

router = APIRouter(include_in_schema=False)

#: Navigation: path, title.
NAV = (("/", "Jobs"), ("/approvals", "Approvals"), ("/agents", "Agents"))


def page(name: str, title: str, **values: object) -> HTMLResponse:
    """The page ``name`` (its template ``page.html``, ``data-page=name``)."""
    html = _env.get_template("page.html").render(page=name, title=title, nav=NAV, **values)
    return HTMLResponse(html, headers=_HEADERS)


@router.get("/login")
async def login_page() -> HTMLResponse:
    """The login form (it posts the token to ``/login``)."""
    return page("login", "Log in")


@router.get("/")
async def jobs_page() -> HTMLResponse:
    """The jobs table."""
    return page("jobs", "Jobs")


@router.get("/jobs/{job_id}")
async def job_page(request: Request, job_id: str) -> HTMLResponse:
    """One job: its timeline, egress ledger and artifacts."""
    return page("job", f"Job {job_id}", job_id=job_id)


@router.get("/jobs/{job_id}/weave")
async def weave_page(job_id: str) -> HTMLResponse:
    """One job tree's audited record graph and its verification."""
    return page("weave", f"Weave of {job_id}", job_id=job_id)


@router.get("/approvals")
async def approvals_page() -> HTMLResponse:
    """The pending approvals."""
    return page("approvals", "Approvals")


@router.get("/agents")
async def agents_page() -> HTMLResponse:
    """The agents and their sandbox policies."""
    return page("agents", "Agents")

"""The web console: server-rendered page shells (Jinja2, autoescaped) at ``/`` whose one small
script reads the JSON API and renders what agents produced as text only. Every page carries a
Content-Security-Policy that allows nothing but this server's own script and style."""

from __future__ import annotations

from ._pages import CSP, STATIC_DIR, router

__all__ = ["CSP", "STATIC_DIR", "router"]

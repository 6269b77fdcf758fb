"""The probe's own destinations: the allow-list's one upstream, and one outside it.

Both are plain HTTP servers in threads of the probe process (the chart's test pod). The
allowed one records every request's headers and reflects them in its body (so an upstream
echoing the sidecar secret is part of the test), and answers ``/done`` only once the probe
says so (the allow-list sandbox waits on it). The forbidden one counts every connection.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # never log (headers carry the canary)
        return


class ProbeServers:
    """The allowed and forbidden servers on ``0.0.0.0`` (a context manager)."""

    def __init__(self, allowed_port: int, forbidden_port: int, host: str = "0.0.0.0") -> None:
        self.requests: list[dict[str, str]] = []
        self.forbidden_connections: list[str] = []
        self.done = threading.Event()
        servers = self

        class Allowed(_Quiet):
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/done"):
                    self._answer(200 if servers.done.is_set() else 404, {"done": servers.done.is_set()})
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                servers.requests.append(headers)
                self._answer(200, {"path": self.path, "headers": headers})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Forbidden(ThreadingHTTPServer):
            def verify_request(self, request: Any, client_address: Any) -> bool:
                servers.forbidden_connections.append(f"{client_address[0]}:{client_address[1]}")
                return True

        class Refuse(_Quiet):
            def do_GET(self) -> None:
                self.send_error(418, "this destination is outside the allow-list")

        self._allowed = ThreadingHTTPServer((host, allowed_port), Allowed)
        self._forbidden = Forbidden((host, forbidden_port), Refuse)
        for server in (self._allowed, self._forbidden):
            server.daemon_threads = True

    @property
    def ports(self) -> tuple[int, int]:
        """The (allowed, forbidden) ports actually bound (0 asks for free ones)."""
        return self._allowed.server_address[1], self._forbidden.server_address[1]

    def received(self, header: str, value: str) -> bool:
        """Whether any request to the allowed server carried ``header: value``."""
        return any(r.get(header.lower()) == value for r in self.requests)

    def __enter__(self) -> ProbeServers:
        for server in (self._allowed, self._forbidden):
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (self._allowed, self._forbidden):
            server.shutdown()
            server.server_close()

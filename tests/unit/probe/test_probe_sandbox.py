"""The probe's sandbox side, run as the sandbox runs it (``python -m airlock.probe.sandbox``),
against servers this test starts on 127.0.0.1: connects, HTTP through a proxy, its listener,
and the canary scan (found by its hash, the value never printed)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.ipv6 import needs_ipv6_loopback

CANARY = "cAnArY-" + "7f3b9d2e1a8c4f60b5e7d9a1c3f5e7b9"
DIGEST = hashlib.sha256(CANARY.encode()).hexdigest()


def run_sandbox(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "airlock.probe.sandbox", json.dumps(spec)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert CANARY not in done.stdout and CANARY not in done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    """A forward HTTP proxy stand-in: answers every absolute-form request itself, echoing a
    header that carries the canary (as an upstream reflecting a secret would)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps(
                {"echo": {"x-airlock-probe": CANARY}} if "reflect" in self.path else {}
            ).encode()
            self.send_response(200 if "allowed" in self.path or "reflect" in self.path else 403)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connects_report_reachable_and_refused(proxy: tuple[str, list[str]]) -> None:
    url, _ = proxy
    open_target = url.removeprefix("http://")
    report = run_sandbox({"tcp": {"open": open_target, "closed": f"127.0.0.1:{closed_port()}"}})
    assert report["tcp"] == {"open": "reachable", "closed": "refused"}


def test_http_goes_through_the_proxy_from_the_environment(proxy: tuple[str, list[str]]) -> None:
    url, seen = proxy
    report = run_sandbox(
        {"http": {"ok": "http://allowed.example:8080/", "no": "http://10.9.9.9:8081/"}}, {"HTTP_PROXY": url}
    )
    assert report["http"]["ok"]["status"] == 200 and report["http"]["no"]["status"] == 403
    assert seen == ["http://allowed.example:8080/", "http://10.9.9.9:8081/"]


def test_the_canary_is_found_by_its_hash_in_env_files_and_reflections(
    tmp_path: Path, proxy: tuple[str, list[str]]
) -> None:
    url, _ = proxy
    (tmp_path / "clean").mkdir()
    (tmp_path / "clean" / "notes.txt").write_text("nothing here\n")
    clean = run_sandbox({"canary_sha256": DIGEST, "scan_roots": [str(tmp_path / "clean")]})
    assert clean["canary_found_in"] == []
    (tmp_path / "leak").mkdir()
    (tmp_path / "leak" / "config.env").write_text(f"export API_KEY={CANARY}\n")
    leaked = run_sandbox(
        {"canary_sha256": DIGEST, "scan_roots": [str(tmp_path / "leak")], "http": {"r": "http://u/reflect"}},
        {"SOME_TOKEN": f"Bearer {CANARY}", "HTTP_PROXY": url},
    )
    places = leaked["canary_found_in"]
    assert "environment" in places
    assert str(tmp_path / "leak" / "config.env") in places
    assert "response of r" in places


def test_its_listener_reports_who_connected() -> None:
    port = closed_port()
    done = subprocess.Popen(
        [sys.executable, "-m", "airlock.probe.sandbox", json.dumps({"listen": port, "hold_until": "http://127.0.0.1:9/",
         "hold_seconds": 3})], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            threading.Event().wait(0.05)
    out, _ = done.communicate(timeout=30)
    peers = json.loads(out)["listener_peers"]
    assert len(peers) == 1 and peers[0].startswith("127.0.0.1:")


def test_bad_input_is_exit_2_with_a_message() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "airlock.probe.sandbox", "[1, 2]"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "must be a JSON object" in done.stdout


def test_the_sandbox_side_imports_nothing_but_the_stdlib() -> None:
    code = (
        "import json, sys, airlock.probe.sandbox; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set(json.loads(done.stdout)) & {"pydantic", "grpc", "layer0", "yaml", "google"} == set()


@needs_ipv6_loopback
def test_the_credential_proxy_is_reached_at_an_ipv6_proxy_address() -> None:
    """On an IPv6 cluster ``HTTP_PROXY`` is ``http://[pod IPv6]:3128``; the credential proxy is
    on the same address (here a server the test starts on ``::1``). The probe writes the URL
    without brackets, which urllib's ``http.client`` reads right (the last ``:N`` is the port)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    server = Server(("::1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        report = run_sandbox(
            {"credential": {"port": server.server_address[1], "path": "/v1/models"}},
            {"HTTP_PROXY": "http://[::1]:3128"},
        )
    finally:
        server.shutdown()
        server.server_close()
    assert report["credential"]["status"] == 200
    assert seen == ["/v1/models"]

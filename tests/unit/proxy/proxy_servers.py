"""Loopback test servers for the proxy tests (imported by conftest.py and the tests).

Every server here is started by the test itself on 127.0.0.1 or ``::1`` (plain or TLS with a
self-signed certificate made with the ``openssl`` CLI); no test sends a byte anywhere else.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SSE_EVENTS = [b"event: a\ndata: first\n\n", b"event: b\ndata: second\n\n"]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, list[str]]
    body: bytes


@dataclass
class RecordingServer:
    """A threaded HTTP/1.1 server on loopback recording every request and connection."""

    server: ThreadingHTTPServer
    requests: list[Recorded] = field(default_factory=list)
    connections: int = 0
    #: /sse waits for this before sending its second event (proves streaming).
    sse_gate: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


def _handler(rec: RecordingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b""):
                            pass
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _handle(self) -> None:
            headers: dict[str, list[str]] = {}
            for k, v in self.headers.items():
                headers.setdefault(k.lower(), []).append(v)
            body = self._body()
            rec.requests.append(Recorded(self.command, self.path, headers, body))
            if self.path == "/sse":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, event in enumerate(SSE_EVENTS):
                    if i:
                        rec.sse_gate.wait(10)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True
                return
            if self.path.startswith("/v1/messages"):
                payload = json.loads(body)
                reply = {
                    "id": "msg_test_1", "type": "message", "role": "assistant", "model": payload["model"],
                    "content": [{"type": "text", "text": "hello through the proxy"}],
                    "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": 5, "output_tokens": 4},
                }  # fmt: skip
                out = json.dumps(reply).encode()
            else:
                out = json.dumps({"path": self.path, "method": self.command, "host": self.headers.get("Host"),
                                  "body": body.decode()}).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(out)

        do_GET = do_POST = do_PUT = do_HEAD = _handle

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    rec: RecordingServer
    tls: ssl.SSLContext | None = None

    def get_request(self) -> Any:
        sock, addr = self.socket.accept()
        self.rec.connections += 1
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class _Server6(_Server):
    address_family = socket.AF_INET6


def _start(tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> RecordingServer:
    kind = _Server6 if ":" in host else _Server
    server = kind((host, 0), BaseHTTPRequestHandler, bind_and_activate=True)
    rec = RecordingServer(server)
    server.rec = rec
    server.tls = tls
    server.RequestHandlerClass = _handler(rec)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return rec


@dataclass
class Cert:
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, self.key)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))

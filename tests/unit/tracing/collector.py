"""An OTLP/HTTP collector stand-in on 127.0.0.1 for the tracing tests: it keeps what it is sent."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Collector:
    """The requests received (path, decoded body) and the address to send them to."""

    def __init__(self) -> None:
        self.received: list[tuple[str, ExportTraceServiceRequest]] = []
        self.url = ""

    def span_names(self) -> list[str]:
        """Every span's name, over all requests."""
        return [
            span.name
            for _, request in self.received
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@contextlib.contextmanager
def collector() -> Iterator[Collector]:
    """A collector listening on a free loopback port while the block runs."""
    found = Collector()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            found.received.append((self.path, ExportTraceServiceRequest.FromString(body)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()

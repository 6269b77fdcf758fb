"""The isolation probe's sandbox side: ``python -m airlock.probe.sandbox '<json>'``.

Runs inside a sandbox (stdlib only) as the command of a ``command``-provider job, and prints
one JSON document: which TCP destinations it could connect to, what HTTP requests through its
proxies answered, who connected to its own listener, and where (if anywhere) it found a
token whose SHA-256 is the canary's. The canary itself never enters the sandbox: only its hash.

Input (every key optional)::

    {"tcp": {"name": "ip:port"}, "http": {"name": "http://url"}, "credential": {"port": 8081,
     "path": "/echo"}, "canary_sha256": "<hex>", "listen": 7070, "hold_until": "http://url",
     "hold_seconds": 120, "scan_roots": ["/run", ...]}

``http`` URLs go through the egress proxy named by ``HTTP_PROXY``; ``credential`` is a request
to the credential proxy on that proxy's host (which adds the sidecar secret upstream).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: Where a secret could have been put for the sandbox to find.
SCAN_ROOTS = ("/run", "/var/run", "/tmp", "/workspace", "/etc", "/home", "/root", "/var/lib", "/opt/airlock")
_TOKEN = re.compile(rb"[A-Za-z0-9_+/=.\-]{8,}")
_MAX_FILE = 1 << 20
_MAX_TOTAL = 64 << 20


def connect(target: str, timeout_s: float = 3.0) -> str:
    """``reachable``, ``refused``, ``timeout`` or ``error: ...`` for a TCP connect to ``host:port``."""
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return "reachable"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError as e:
        return f"error: {e.strerror or e}"


def fetch(url: str, proxy: str | None, timeout_s: float = 10.0) -> dict[str, Any]:
    """GET ``url`` (through ``proxy`` when given): status, headers and up to 4 KiB of body."""
    handlers = [urllib.request.ProxyHandler({"http": proxy, "https": proxy} if proxy else {})]
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(url, timeout=timeout_s) as response:
            body = response.read(4096)
            return {
                "status": response.status,
                "headers": dict(response.headers),
                "body": body.decode("latin-1"),
            }
    except urllib.error.HTTPError as e:
        return {"status": e.code, "headers": dict(e.headers or {}), "body": e.read(4096).decode("latin-1")}
    except (OSError, ValueError) as e:
        return {"status": 0, "error": str(getattr(e, "reason", e))}


def _tokens(data: bytes) -> set[bytes]:
    found = set(_TOKEN.findall(data))
    for token in list(found):
        for part in re.split(rb"[=:]", token):
            if len(part) >= 8:
                found.add(part)
    return found


def scan(digest: str, roots: list[str], extra: dict[str, bytes]) -> list[str]:
    """Where a token hashing to ``digest`` appears: environments, command lines, files, ``extra``."""
    places: list[str] = []

    def look(where: str, data: bytes) -> None:
        if any(hashlib.sha256(t).hexdigest() == digest for t in _tokens(data)):
            places.append(where)

    look("environment", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
    for proc in Path("/proc").glob("[0-9]*"):
        for name in ("environ", "cmdline"):
            try:
                look(f"{proc}/{name}", (proc / name).read_bytes().replace(b"\0", b"\n"))
            except OSError:
                continue
    total = 0
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda _: None, followlinks=False):
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
            for filename in filenames:
                path = os.path.join(dirpath, filename)
                try:
                    if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > _MAX_FILE:
                        continue
                    data = Path(path).read_bytes()
                except OSError:
                    continue
                total += len(data)
                if total > _MAX_TOTAL:
                    places.append(f"(scan stopped after {_MAX_TOTAL >> 20} MiB)")
                    return places
                look(path, data)
    for where, data in extra.items():
        look(where, data)
    return places


class Listener:
    """Accepts TCP connections on ``0.0.0.0:port`` in the background; records each peer."""

    def __init__(self, port: int) -> None:
        self.peers: list[str] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("0.0.0.0", port))
        self._sock.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self._sock.accept()
            except OSError:
                return
            self.peers.append(f"{peer[0]}:{peer[1]}")
            conn.close()


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Every check ``spec`` asks for; the report."""
    listener = Listener(int(spec["listen"])) if spec.get("listen") else None
    proxy = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy")
    report: dict[str, Any] = {"tcp": {}, "http": {}}
    report["tcp"] = {name: connect(target) for name, target in (spec.get("tcp") or {}).items()}
    extra: dict[str, bytes] = {}
    for name, url in (spec.get("http") or {}).items():
        answer = fetch(url, proxy)
        report["http"][name] = {k: answer.get(k) for k in ("status", "error")}
        extra[f"response of {name}"] = json.dumps(answer).encode()
    credential = spec.get("credential")
    if credential and proxy:
        host = urlsplit(proxy).hostname or ""
        url = f"http://{host}:{int(credential['port'])}{credential.get('path') or '/'}"
        answer = fetch(url, None)
        report["credential"] = {k: answer.get(k) for k in ("status", "error")}
        extra["response of the credential proxy"] = json.dumps(answer).encode()
    elif credential:
        report["credential"] = {"status": 0, "error": "no HTTP_PROXY in the sandbox: no proxy to reach"}
    if spec.get("canary_sha256"):
        roots = list(spec.get("scan_roots") or SCAN_ROOTS)
        report["canary_found_in"] = scan(str(spec["canary_sha256"]), roots, extra)
    if spec.get("hold_until"):
        deadline = time.monotonic() + float(spec.get("hold_seconds") or 120)
        while time.monotonic() < deadline and fetch(str(spec["hold_until"]), proxy, 5.0).get("status") != 200:
            time.sleep(1.0)
    if listener is not None:
        report["listener_peers"] = list(listener.peers)
    return report


def main(argv: list[str]) -> int:
    """``python -m airlock.probe.sandbox '<json>'``: print the report; 2 on bad input."""
    try:
        spec = json.loads(argv[1]) if len(argv) > 1 else {}
        if not isinstance(spec, dict):
            raise ValueError("the input must be a JSON object")
    except ValueError as e:
        print(json.dumps({"error": f"bad probe input: {e}"}))
        return 2
    print(json.dumps(run(spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

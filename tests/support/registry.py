"""A real image registry on 127.0.0.1 for the push tests: Debian's ``docker-registry`` package
(the distribution registry, ``/usr/bin/docker-registry``), storage in a temporary directory.
Docker treats 127.0.0.0/8 registries as insecure-allowed, so plain HTTP works with no daemon
configuration. The test that starts one stops it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import free_port

REGISTRY_BINARY = Path("/usr/bin/docker-registry")
#: The manifest types a digest is asked for (what the engine pushes).
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    )
)


def require_registry() -> None:
    """Skip without the registry binary, or fail when the suite must run Docker tests."""
    if REGISTRY_BINARY.exists():
        return
    message = f"{REGISTRY_BINARY} is missing (apt-get install docker-registry)"
    if os.environ.get("AIRLOCK_REQUIRE_DOCKER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def local_registry(workdir: Path, *, read_only: bool = False) -> Iterator[str]:
    """A registry serving on 127.0.0.1:<free port>: its ``host:port``. ``read_only`` refuses pushes.

    Raises:
        AssertionError: it exited or did not answer ``/v2/``.
    """
    require_registry()
    port = free_port()
    storage = workdir / "storage"
    storage.mkdir(parents=True)
    maintenance = {"readonly": {"enabled": True}} if read_only else {}
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "maintenance": maintenance},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    config_file = workdir / "config.yml"
    config_file.write_text(json.dumps(config))  # JSON is YAML
    log = (workdir / "registry.log").open("wb")
    proc = subprocess.Popen([str(REGISTRY_BINARY), "serve", str(config_file)], stdout=log, stderr=log)
    try:
        _wait_answering(f"http://127.0.0.1:{port}/v2/", proc)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _wait_answering(url: str, proc: subprocess.Popen[bytes], limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            assert proc.poll() is None, f"the registry exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"the registry did not answer {url}"
            time.sleep(0.1)


def registry_tags(registry: str, repository: str) -> list[str]:
    """The tags the registry's v2 API lists for ``repository``."""
    with urllib.request.urlopen(f"http://{registry}/v2/{repository}/tags/list", timeout=10) as answer:
        return list(json.load(answer)["tags"] or [])


def registry_digest(registry: str, repository: str, tag: str) -> str:
    """The digest the registry's v2 API gives the manifest ``repository:tag``."""
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": MANIFEST_TYPES},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.headers["Docker-Content-Digest"])

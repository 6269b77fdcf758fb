"""The offline demo end to end: ``airlock run demo`` with the REAL local model in a Docker
sandbox (examples/airlock.yaml).

The model server listens on the egress gateway; its key reaches it only through the
credential proxy (a sidecar credential). The 1.5B model may or may not get the arithmetic
right, so only the loop's mechanics are asserted, never the answer.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from airlock.localmodel import CachePaths
from airlock.localmodel._manager import _pid_alive
from airlock.sandbox.docker._labels import LABEL_OWNER

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "airlock.yaml"
QUESTION = "What is 17 * 23? Use the calculator."


def _airlock() -> list[str]:
    script = Path(sys.executable).with_name("airlock")
    return [str(script)] if script.exists() else [sys.executable, "-m", "airlock"]


def _egress_gateway(client: Any) -> str:
    network = client.networks.get("airlock-egress")
    (config,) = [c for c in network.attrs["IPAM"]["Config"] if c.get("Gateway")]
    return str(config["Gateway"])


def test_the_demo_agent_runs_on_the_local_model_through_the_credential_proxy(
    runner_image: str, state_dir: Path, docker_client: Any
) -> None:
    env = {**os.environ, "AIRLOCK_STATE_DIR": str(state_dir), "COLUMNS": "120"}
    env.pop("AIRLOCK_CONFIG", None)
    proc = subprocess.Popen(
        [*_airlock(), "run", "--config", str(EXAMPLE), "demo", QUESTION, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    owner = f"{socket.gethostname()}:{proc.pid}"
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # 0: complete; 1: the small model ran out of turns or time. Anything else is a failure
    # of the machinery (2 config, 3 environment, 4 turn error).
    assert proc.returncode in (0, 1), f"exit {proc.returncode}\n{stderr}\n{stdout}"
    data = json.loads(stdout)
    summary = data["summary"]
    assert summary["agent"] == "demo" and summary["backend"] == "docker"
    assert summary["turns"] >= 1 and summary["tokens_in"] > 0

    # The server listened on the egress gateway (not loopback), and this command started it.
    gateway = _egress_gateway(docker_client)
    local = summary["local_model"]
    base = urlsplit(local["base_url"])
    assert base.hostname == gateway, local
    assert base.path == "/v1"
    origin = f"{base.scheme}://{base.netloc}"

    # Every model call went through the credential proxy, to the server's address.
    calls = summary["network"]["credential_proxy"]
    assert calls, summary["network"]
    assert len(calls) >= summary["turns"]
    for call in calls:
        assert call["credential"] == "local-model-key"
        assert call["upstream"] == origin
        assert call["path"] == "/v1/chat/completions"
    assert any(call["status"] == 200 for call in calls), calls
    assert "Bearer" not in stdout and "Bearer" not in stderr

    # Nothing is left: no container or network of that process, no control directory…
    owned = {"label": f"{LABEL_OWNER}={owner}"}
    assert docker_client.containers.list(all=True, filters=owned) == []
    assert docker_client.networks.list(filters=owned) == []
    assert list(state_dir.iterdir()) == []
    # …and the model server it started is stopped (one it reused would be left running).
    state_file = CachePaths.default().servers_dir / f"{base.hostname}-{base.port}.json"
    if local["started"]:
        assert not _pid_alive(local["pid"]), "the local model server is still running"
        assert not state_file.exists()
    else:
        assert _pid_alive(local["pid"])

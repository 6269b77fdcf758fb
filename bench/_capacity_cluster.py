"""The Kubernetes stand-in for ``bench/capacity.py``: the API server in this process (its request
log is what the bench counts), its pods run on the local Docker engine, and the configuration of
an ``airlock serve`` pointed at it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from airlock.testing import DockerPods, KubeApiStandIn, text_step, tool_step

NS = "airlock-sandboxes"
AGENT = "bench-capacity"
#: Seconds a deleted pod stays Terminating (its kubelet stopping the containers) before it is
#: gone: the backend polls each deleted pod until it reads 404, as on a real cluster.
POD_TERMINATION_S = 1.0
#: The allow rule of the egress case (a documentation address: no traffic is sent to it, the
#: rule only makes the backend start a proxy pod and its policies).
EGRESS_RULE = {"destination": "192.0.2.10", "port": 443}


@contextlib.contextmanager
def cluster(where: Path) -> Iterator[tuple[KubeApiStandIn, Path]]:
    """The stand-in (namespace :data:`NS`, pods on Docker) and a kubeconfig for it."""
    pods = DockerPods()
    try:
        with KubeApiStandIn(pods=pods, namespaces=(NS,), pod_termination_s=POD_TERMINATION_S) as api:
            yield api, api.write_kubeconfig(where / "kubeconfig")
    finally:
        pods.close()


def write_config(
    where: Path, kubeconfig: Path, *, sleep_s: float, pool: int = 0, egress: bool = False
) -> Path:
    """``airlock.yaml``: one scripted agent on the kubernetes backend whose one turn runs a bash
    ``sleep sleep_s`` then answers; a warm pool of ``pool`` (0: none); ``egress``: one allow rule."""
    agent: dict[str, Any] = {
        "provider": {
            "kind": "scripted",
            "script": [tool_step("bash", {"command": f"sleep {sleep_s:g}"}, id="t"), text_step("done")],
        },
        "tools": ["bash"],
        "backend": "kubernetes",
        "defaults": {"max_turns": 4, "max_duration": "600s"},
    }
    if egress:
        agent["network"] = {"allow": [EGRESS_RULE]}
    backend = {
        "namespace": NS,
        "kubeconfig": str(kubeconfig),
        "connect": "pod_ip",
        "image_pull_policy": "Never",
        "start_timeout": 180.0,
        "network_policy": "assume_enforced",
        # The runner's fence tries the pod's own loopback: nothing leaves the machine.
        "enforcement": {"metadata_address": "127.0.0.1:9"},
    }
    config: dict[str, Any] = {"version": 1, "backends": {"kubernetes": backend}, "agents": {AGENT: agent}}
    if pool:
        config["pool"] = {"size": pool, "max": max(32, pool), "refill_concurrency": 4}
    where.mkdir(parents=True, exist_ok=True)
    path = where / "airlock.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path

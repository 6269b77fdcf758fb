"""GetStatus over real gRPC: a controller reports each backend's isolation proof, and
``airlock status`` shows it (exit 1 while jobs are refused).

The Kubernetes agent runs against the stand-in API server whose scripted pods play the
network (see tests/unit/sandbox/kubernetes_backend/test_enforcement.py): once as a cluster
that enforces NetworkPolicy, once as one that does not.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from airlock.cli import app
from airlock.testing import KubeApiStandIn, ScriptedPods
from tests.support.controller import running_controller
from tests.unit.sandbox.kubernetes_backend.test_enforcement import METADATA, NS, Network


def write_config(tmp_path: Path, kubeconfig: Path) -> Path:
    config = {
        "version": 1,
        "backends": {"kubernetes": {"kubeconfig": str(kubeconfig), "namespace": NS,
                                    "enforcement": {"metadata_address": METADATA, "timeout_s": 5}}},
        "agents": {
            "pods": {"provider": {"kind": "scripted", "script": []}, "backend": "kubernetes"},
            "local": {"provider": {"kind": "scripted", "script": []}, "backend": "process"},
        },
    }  # fmt: skip
    path = tmp_path / "airlock.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("enforcing", [True, False])
async def test_the_status_rpc_and_cli_report_the_proof(tmp_path: Path, enforcing: bool) -> None:
    pods = ScriptedPods()
    network = Network(pods)
    network.enforcing = enforcing
    pods.script = network.play
    with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
        config = write_config(tmp_path, api.write_kubeconfig(tmp_path / "kubeconfig"))
        async with running_controller(config, tmp_path / "data", tmp_path / "sb", "airlock-runner:test") as (
            controller,
            client,
        ):
            proofs = await client.status()
            cli = await asyncio.to_thread(
                CliRunner().invoke,
                app,
                ["status", "--address", controller.address, "--token", controller.token, "--json"],
            )
    assert len(proofs) == 1, "one proof per backend and namespace; the process agent has none"
    proof = proofs[0]
    assert (proof.backend, proof.scope) == ("kubernetes", NS)
    assert proof.status == ("enforced" if enforcing else "failed")
    assert any("cloud metadata" in line for line in proof.evidence)
    assert cli.exit_code == (0 if enforcing else 1), cli.output
    shown = json.loads(cli.output)["isolation"][0]
    assert shown["status"] == proof.status and shown["allows_jobs"] is enforcing

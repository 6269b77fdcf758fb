"""``airlock doctor --backend kubernetes --probe``: a Helm release's test hooks run again from
outside, against the stand-in API server. The hooks are the chart's own (``helm template``),
stored in a release Secret exactly as Helm stores one; the test pod's outcome is scripted,
so this shows the runner of the test, not the probe's verdict (see tests/integration for
the probe itself)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from airlock.cli import app
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.sandbox.kubernetes._release_probe import decode_release, probe_release, release_hooks
from airlock.testing import KubeApiStandIn, PodScript, ScriptedPods
from tests.support.helm import helm
from tests.support.kube import until

CHART = Path(__file__).resolve().parents[4] / "helm" / "airlock"
TEST_POD = "airlock-isolation-test"
VERDICT = "deny-all  other sandbox 10.244.0.9:7070  refused  PASS\nisolation holds\n"


def chart_hooks() -> list[dict[str, Any]]:
    """The chart's test hooks as Helm records them in a release (name, kind, weight, manifest)."""
    text = helm("template", "airlock", str(CHART), "-n", "airlock",
                "--show-only", "templates/tests/isolation-probe.yaml").stdout  # fmt: skip
    hooks = []
    for doc in (d for d in yaml.safe_load_all(text) if d):
        annotations = doc["metadata"]["annotations"]
        hook = {
            "name": doc["metadata"]["name"],
            "kind": doc["kind"],
            "path": "airlock/templates/tests/isolation-probe.yaml",
            "manifest": yaml.safe_dump(doc),
            "events": [annotations["helm.sh/hook"]],
            "weight": int(annotations.get("helm.sh/hook-weight", "0")),
            "delete_policies": [annotations["helm.sh/hook-delete-policy"]],
        }
        hooks.append(hook)
    return hooks


def release_secret(version: int, hooks: list[dict[str, Any]], status: str = "deployed") -> dict[str, Any]:
    """A release stored the way Helm stores it: JSON, gzip, base64, in a Secret (base64 again)."""
    release = {"name": "airlock", "namespace": "airlock", "version": version, "hooks": hooks,
               "info": {"status": status}}  # fmt: skip
    stored = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return {
        "metadata": {
            "name": f"sh.helm.release.v1.airlock.v{version}",
            "labels": {"owner": "helm", "name": "airlock", "status": status, "version": str(version)},
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(stored).decode()},
    }


@dataclass
class Cluster:
    """The stand-in, its scripted pods, settings reaching it, and each pod's scripted outcome."""

    api: KubeApiStandIn
    pods: ScriptedPods
    settings: KubernetesSettings
    outcome: dict[str, PodScript] = field(default_factory=dict)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    outcome: dict[str, PodScript] = {}
    pods = ScriptedPods(lambda pod: outcome.get(pod["metadata"]["name"], PodScript()))
    with KubeApiStandIn(pods=pods, namespaces=("airlock", "airlock-sandboxes")) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        yield Cluster(api, pods, KubernetesSettings(kubeconfig=str(kubeconfig)), outcome)


def core(settings: KubernetesSettings) -> Any:
    """The official client's CoreV1Api on the stand-in."""
    import kubernetes

    module: Any = kubernetes
    return module.client.CoreV1Api(module.config.new_client_from_config(config_file=settings.kubeconfig))


def probe_pods(api: KubeApiStandIn) -> list[dict[str, Any]]:
    return [p for p in api.objects("pods", "airlock") if p["spec"]["containers"][0]["name"] == "probe"]


def test_the_hooks_come_in_helms_order_from_the_stored_release() -> None:
    hooks = chart_hooks()
    secret = release_secret(3, hooks)
    release = decode_release(secret)
    objects = release_hooks(release)
    assert [o["kind"] for o in objects][-1] == "Pod"
    weights = [int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in objects]
    assert weights == sorted(weights)
    assert release_hooks(release, "post-install") == []


def test_a_passing_test_pod_is_ok_with_its_verdict(
    cluster: Cluster,
) -> None:
    api, pods, settings = cluster.api, cluster.pods, cluster.settings
    cluster.outcome[TEST_POD] = PodScript(exit_code=0)
    core(settings).create_namespaced_secret("airlock", release_secret(1, chart_hooks(), status="superseded"))
    core(settings).create_namespaced_secret("airlock", release_secret(2, chart_hooks()))
    # A test pod of an earlier run is replaced, as helm's before-hook-creation does.
    old = {"metadata": {"name": TEST_POD}, "spec": {"containers": [{"name": "old", "image": "x"}]}}
    core(settings).create_namespaced_pod("airlock", old)

    async def run() -> Any:
        task = asyncio.create_task(probe_release(settings, "airlock/airlock", wait_s=30))
        await until(lambda: probe_pods(api))
        pods.set_logs("airlock", TEST_POD, "probe", VERDICT)
        return await task

    (check,) = asyncio.run(run())
    assert check.status == "ok" and "isolation holds" in check.message
    assert {o["metadata"]["name"] for o in api.objects("serviceaccounts", "airlock")} == {"airlock-probe"}
    # Every kind of hook is recreated: the probe's own config, and its access for the test.
    assert [o["metadata"]["name"] for o in api.objects("configmaps", "airlock")] == ["airlock-probe"]
    (binding,) = api.objects("rolebindings", "airlock-sandboxes")
    assert binding["roleRef"]["name"] == "airlock-sandboxes"  # the controller's own Role
    (cluster_binding,) = api.objects("clusterrolebindings")
    assert cluster_binding["subjects"][0]["name"] == "airlock-probe"
    (pod,) = api.objects("pods", "airlock")
    assert pod["spec"]["containers"][0]["args"][:3] == [
        "probe",
        "--serve-config",
        "/etc/airlock-probe/airlock.yaml",
    ]


def test_a_failing_test_pod_is_an_error_with_its_log(
    cluster: Cluster,
) -> None:
    pods, settings = cluster.pods, cluster.settings
    cluster.outcome[TEST_POD] = PodScript(exit_code=1)
    pods.set_logs("airlock", TEST_POD, "probe", "deny-all  controller 10.96.0.20:7878  reachable  FAIL\n")
    core(settings).create_namespaced_secret("airlock", release_secret(1, chart_hooks()))
    (check,) = asyncio.run(probe_release(settings, "airlock/airlock", wait_s=30))
    assert check.status == "error"
    assert "controller 10.96.0.20:7878  reachable  FAIL" in check.message
    assert "NetworkPolicy" in check.hint


def test_no_release_or_no_test_is_named(
    cluster: Cluster,
) -> None:
    settings = cluster.settings
    (check,) = asyncio.run(probe_release(settings, "airlock/other"))
    assert check.status == "error" and "no deployed Helm release 'other'" in check.message
    core(settings).create_namespaced_secret("airlock", release_secret(1, []))
    (check,) = asyncio.run(probe_release(settings, "airlock/airlock"))
    assert check.status == "error" and "isolationTest.enabled" in check.hint


def test_the_cli_runs_it_and_exits_by_its_outcome(cluster: Cluster, tmp_path: Path) -> None:
    pods, settings = cluster.pods, cluster.settings
    cluster.outcome[TEST_POD] = PodScript(exit_code=1)
    pods.set_logs("airlock", TEST_POD, "probe", "a hole\n")
    core(settings).create_namespaced_secret("airlock", release_secret(1, chart_hooks()))
    config = tmp_path / "airlock.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "backends": {"kubernetes": {"kubeconfig": settings.kubeconfig}},
                "agents": {"a": {"provider": {"kind": "scripted", "script": []}, "backend": "kubernetes"}},
            }
        )
    )
    runner = CliRunner()
    done = runner.invoke(app, ["doctor", "--config", str(config), "--backend", "kubernetes", "--probe",
                               "--release", "airlock/airlock", "--json"])  # fmt: skip
    assert done.exit_code == 1, done.output
    checks = {c["name"]: c for c in json.loads(done.output)["checks"]}
    assert checks["config"]["status"] == "ok", checks["config"]
    assert checks["isolation probe (airlock/airlock)"]["status"] == "error"
    assert "a hole" in checks["isolation probe (airlock/airlock)"]["message"]
    assert "docker" not in " ".join(checks), "--backend kubernetes checks only that backend"
    usage = runner.invoke(app, ["doctor", "--backend", "docker", "--probe"])
    assert usage.exit_code == 2 and "--probe needs --backend naming one of: kubernetes" in usage.output

"""The Helm chart on a real cluster: install, the isolation test, a job, upgrade, uninstall.

What no offline check shows: the controller's pod really starts with the rendered config,
its Role really suffices, `helm test` passes (the cluster enforces the policies), a job
really completes in a sandbox pod, and an uninstall leaves nothing behind. They run only
when a cluster is configured:

* ``KUBECONFIG``: a kubeconfig whose user may install the chart (namespaces, RBAC, a PVC);
* ``AIRLOCK_K8S_IMAGE`` and ``AIRLOCK_K8S_CONTROLLER_IMAGE``: the runner and controller
  images (``airlock images build``), pushed to a registry the nodes pull from;
* a CNI that enforces NetworkPolicy, or `helm test` fails (as it should).

Everything goes into a throwaway release namespace (and its sandbox namespace), deleted at
the end.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.jobs import ControllerClient, JobState
from airlock.sandbox.kubernetes import Access, AccessTable, KubernetesSettings
from airlock.sandbox.kubernetes._api import KubeApi
from airlock.sandbox.kubernetes._channel import PortForward
from airlock.testing import script_yaml, text_step
from tests.support.helm import CHART, helm_binary


def _skip_reason() -> str | None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig or not Path(kubeconfig).is_file():
        return (
            "KUBECONFIG names no readable file: live Helm tests need a real cluster (see README, Helm chart)"
        )
    missing = [v for v in ("AIRLOCK_K8S_IMAGE", "AIRLOCK_K8S_CONTROLLER_IMAGE") if not os.environ.get(v)]
    if missing:
        return f"{' and '.join(missing)} not set: the images, pushed where the cluster's nodes pull from"
    return None


SKIP_REASON = _skip_reason()

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or ""),
    pytest.mark.timeout(1800),
]


def live_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """helm against the configured cluster (``tests.support.helm.helm`` hides it)."""
    done = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True)  # the real cluster
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def image_values(variable: str) -> dict[str, str]:
    repository, _, tag = os.environ[variable].rpartition(":")
    return {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    namespace = f"airlock-live-{secrets.token_hex(3)}"
    script = yaml.safe_load(script_yaml([text_step("hello from the chart")]))
    values = {
        "controller": {"image": image_values("AIRLOCK_K8S_CONTROLLER_IMAGE")},
        "sandbox": {"image": image_values("AIRLOCK_K8S_IMAGE")},
        "agents": {"greeter": {"provider": {"kind": "scripted", "script": script}, "tools": []}},
    }
    path = tmp_path_factory.mktemp("helm") / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    live_helm("install", "airlock", str(CHART), "-n", namespace, "--create-namespace", "-f", str(path),
              "--wait", "--timeout", "10m")  # fmt: skip
    try:
        yield {"namespace": namespace, "values": path}
    finally:
        live_helm("uninstall", "airlock", "-n", namespace, "--wait", check=False)
        kube().CoreV1Api().delete_namespace(namespace)


def test_helm_test_proves_the_isolation(release: dict[str, Any]) -> None:
    done = live_helm("test", "airlock", "-n", release["namespace"], "--logs", "--timeout", "10m", check=False)
    assert done.returncode == 0, f"the isolation test failed:\n{done.stdout}\n{done.stderr}"


#: What the test below asks with the operator's kubeconfig: the token, the controller's pod, a
#: port-forward to it.
_SUBMIT = AccessTable(
    "the live test's",
    (
        Access("get", "", "secrets"),
        Access("list", "", "pods"),
        *(Access(verb, "", "pods/portforward") for verb in ("get", "create")),
    ),
)


def test_a_job_completes_through_the_service(release: dict[str, Any]) -> None:
    namespace = release["namespace"]

    async def job() -> str:
        api = await KubeApi.connect(KubernetesSettings(namespace=namespace), _SUBMIT)
        try:
            secret = await api.call(api.core.read_namespaced_secret, "airlock-token", namespace)
            token = base64.b64decode(secret.data["token"]).decode()
            pods = await api.call(
                api.core.list_namespaced_pod,
                namespace,
                label_selector="app.kubernetes.io/component=controller",
            )
            forward = PortForward(api, namespace, pods.items[0].metadata.name, 7878)
            address = await forward.start()
            try:
                async with ControllerClient(address, token) as client:
                    submitted = await client.submit("greeter", "hi")
                    finished = await asyncio.wait_for(client.wait(submitted.id), 600)
                    assert finished.state == JobState.SUCCEEDED, finished.error
                    assert finished.output is not None
                    return str(finished.output.message.as_text())
            finally:
                await forward.aclose()
        finally:
            api.close()

    assert asyncio.run(job()) == "hello from the chart"


def kube() -> Any:
    """The official client's module, configured from KUBECONFIG (untyped, hence Any)."""
    import kubernetes

    module: Any = kubernetes
    module.config.load_kube_config()
    return module.client


def token_of(namespace: str) -> str:
    secret: Any = kube().CoreV1Api().read_namespaced_secret("airlock-token", namespace)
    return str(secret.data["token"])


def test_an_upgrade_keeps_the_token_and_uninstall_leaves_no_sandbox(release: dict[str, Any]) -> None:
    namespace = release["namespace"]
    before = token_of(namespace)
    live_helm("upgrade", "airlock", str(CHART), "-n", namespace, "-f", str(release["values"]), "--wait")
    assert before and token_of(namespace) == before
    live_helm("uninstall", "airlock", "-n", namespace, "--wait")
    client = kube()
    core, net = client.CoreV1Api(), client.NetworkingV1Api()
    managed = "app.kubernetes.io/managed-by=airlock"
    left: list[Any] = [
        *core.list_pod_for_all_namespaces(label_selector=managed).items,
        *core.list_secret_for_all_namespaces(label_selector=managed).items,
        *net.list_network_policy_for_all_namespaces(label_selector=managed).items,
    ]
    assert [f"{o.metadata.namespace}/{o.metadata.name}" for o in left] == []

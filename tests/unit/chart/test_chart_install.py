"""An install that comes up: the images are pinned by digest when one is given (the Deployment,
the sandboxes and their proxies run exactly what ``airlock images push`` pushed), and the
install notes fail loudly when an image names no registry the nodes could pull from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.config import load_config
from airlock.sandbox.kubernetes import KubernetesSettings
from tests.support.helm import CHART, helm, objects, render, render_notes

DIGEST = "sha256:" + "5e" * 32
REGISTRY = "registry.example.com/team"


def rendered(*values: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return objects(render(*values, sets=sets))


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def backend_settings(docs: list[dict[str, Any]]) -> KubernetesSettings:
    """The production controller's settings (not the isolation test hook's config)."""
    (found,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config")]
    config = yaml.safe_load(found["data"]["airlock.yaml"])
    return KubernetesSettings.model_validate(config["backends"]["kubernetes"])


def helm_refuses(values: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = helm("template", "rel", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0, f"helm accepted {values}"
    return done.stderr


PINNED = (
    f"controller.image.repository={REGISTRY}/airlock-controller",
    f"controller.image.digest={DIGEST}",
    f"sandbox.image.repository={REGISTRY}/airlock-runner",
    f"sandbox.image.digest={DIGEST}",
)


def test_a_digest_pins_the_controller_the_sandboxes_and_their_proxies() -> None:
    docs = rendered(sets=PINNED)
    (controller,) = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert controller["image"] == f"{REGISTRY}/airlock-controller@{DIGEST}"
    settings = backend_settings(docs)
    assert settings.image == f"{REGISTRY}/airlock-runner@{DIGEST}"
    assert settings.proxy.image is None  # the proxy runs the runner image: pinned alike


def test_without_a_digest_the_tag_is_the_charts_app_version() -> None:
    (controller,) = of_kind(rendered(), "Deployment")["spec"]["template"]["spec"]["containers"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert controller["image"] == f"airlock-controller:{app_version}"


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"controller": {"image": {"digest": "sha256:abc"}}}, "controller.image.digest"),
        ({"sandbox": {"image": {"digest": "latest"}}}, "sandbox.image.digest"),
        (
            {"sandbox": {"image": {"repository": f"{REGISTRY}/airlock-runner@{DIGEST}"}}},
            "sandbox.image.repository",
        ),
    ],
)
def test_a_malformed_digest_or_repository_is_refused_naming_the_value(
    values: dict[str, Any], where: str, tmp_path: Path
) -> None:
    assert where in helm_refuses(values, tmp_path)


def test_the_notes_fail_an_image_that_names_no_registry() -> None:
    notes = render_notes()
    assert 'ERROR: controller.image.repository "airlock-controller" names no registry' in notes
    assert 'ERROR: sandbox.image.repository "airlock-runner" names no registry' in notes
    assert "airlock images push REGISTRY" in notes


@pytest.mark.parametrize(
    "sets",
    [
        PINNED,
        (
            "controller.image.repository=localhost:5000/airlock-controller",
            "sandbox.image.repository=airlock-runner",
            "sandbox.image.pullPolicy=Never",
        ),
    ],
    ids=["pushed", "preloaded"],
)
def test_the_notes_accept_a_registry_or_an_image_preloaded_on_the_nodes(sets: tuple[str, ...]) -> None:
    assert "names no registry" not in render_notes(sets=sets)


def test_the_notes_say_how_to_submit() -> None:
    """The submit command in the notes is one the CLI takes (``--address``)."""
    assert "airlock submit --address 127.0.0.1:7878 AGENT" in render_notes()


def test_the_job_store_claim_is_one_pod_at_a_time_by_default() -> None:
    claim = of_kind(rendered(), "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteOncePod"]
    assert "storageClassName" not in claim["spec"]  # the cluster's default


@pytest.mark.parametrize("modes", [["ReadWriteMany"], ["ReadWriteOnce", "ReadWriteMany"], ["ReadOnlyMany"]])
def test_a_shared_volume_is_refused_for_sqlite(modes: list[str], tmp_path: Path) -> None:
    assert "persistence.accessModes" in helm_refuses({"persistence": {"accessModes": modes}}, tmp_path)


def test_the_notes_say_the_claim_needs_a_default_storage_class() -> None:
    notes = " ".join(render_notes().split())
    assert "uses the cluster's default StorageClass (ReadWriteOncePod)" in notes
    assert "new EKS clusters have none" in notes and "persistence.storageClass" in notes
    named = " ".join(render_notes(sets=("persistence.storageClass=gp3",)).split())
    assert "default StorageClass" not in named


def test_the_notes_send_gitops_installs_to_an_existing_secret() -> None:
    """Rendered without a cluster (Argo CD), the generated token would change on every sync."""
    assert "set auth.existingSecret" in " ".join(render_notes().split())
    assert "auth.existingSecret" not in render_notes(sets=("auth.existingSecret=my-token",))


def test_an_existing_secret_is_mounted_and_no_token_is_generated() -> None:
    docs = rendered(sets=("auth.existingSecret=my-token", "auth.existingSecretKey=jobs-api"))
    assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-token")]
    volumes = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    (token,) = [v for v in volumes if v["name"] == "token"]
    assert token["secret"]["secretName"] == "my-token"
    assert token["secret"]["items"] == [{"key": "jobs-api", "path": "token"}]


class StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a mapping with a repeated key (as strict consumers do:
    kubectl apply --validate=strict, Argo CD's diff, Go's yaml.v3)."""


def _no_repeated_keys(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"repeated key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_repeated_keys)
EXAMPLES = sorted((CHART / "examples").glob("*.yaml"))


@pytest.mark.parametrize("values", [None, *EXAMPLES], ids=["default", *(p.stem for p in EXAMPLES)])
def test_every_rendered_document_has_each_key_once(values: Path | None) -> None:
    text = render(*([values] if values else []), sets=("controller.podLabels.team=agents",))
    documents = [d for d in yaml.load_all(text, Loader=StrictLoader) if d]
    assert len(documents) >= 9
    if values is not None:
        yaml.load(values.read_text(), Loader=StrictLoader)


def test_the_values_files_have_each_key_once() -> None:
    yaml.load((CHART / "values.yaml").read_text(), Loader=StrictLoader)


def test_pod_labels_are_added_and_never_replace_the_selector() -> None:
    deployment = of_kind(rendered(sets=("controller.podLabels.team=agents",)), "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "agents"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    (
        "pod label on a selector key",
        {"controller": {"podLabels": {"app.kubernetes.io/instance": "x"}}},
        "controller.podLabels",
    ),
    ("common label on the chart's key", {"commonLabels": {"app.kubernetes.io/name": "x"}}, "commonLabels"),
    (
        "controller cpu",
        {"controller": {"resources": {"limits": {"cpu": "lots"}}}},
        "controller.resources.limits.cpu",
    ),
    (
        "controller resource",
        {"controller": {"resources": {"requests": {"gpus": 1}}}},
        "controller.resources.requests",
    ),
    ("controller resources key", {"controller": {"resources": {"limit": {}}}}, "controller.resources"),
    ("quota key", {"sandbox": {"resourceQuota": {"cpus": "4"}}}, "sandbox.resourceQuota"),
    ("quota value", {"sandbox": {"resourceQuota": {"pods": "-1"}}}, "sandbox.resourceQuota.pods"),
    ("limit range", {"sandbox": {"limitRange": {"maximum": {"cpu": "4"}}}}, "sandbox.limitRange"),
    (
        "policy peer",
        {"controller": {"networkPolicy": {"from": [{"namespace": "x"}]}}},
        "controller.networkPolicy.from.0",
    ),
    (
        "sandboxes in the release namespace",
        {"sandbox": {"namespace": {"name": "airlock"}}},
        "sandbox.namespace.name",
    ),
    (
        "probe ports",
        {"isolationTest": {"allowedPort": 9000, "forbiddenPort": 9000}},
        "isolationTest.forbiddenPort",
    ),
]


@pytest.mark.parametrize(("case", "values", "where"), BAD_VALUES, ids=[c for c, _, _ in BAD_VALUES])
def test_bad_values_are_refused_naming_the_value(
    case: str, values: dict[str, Any], where: str, tmp_path: Path
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = helm("template", "rel", str(CHART), "-n", "airlock", "-f", str(path), check=False)
    assert done.returncode != 0, f"helm accepted {values}"
    assert where in done.stderr


def test_no_quota_limit_range_or_controller_policy_unless_asked() -> None:
    kinds = {d["kind"] for d in rendered()}
    assert not kinds & {"ResourceQuota", "LimitRange"}
    assert [d["metadata"]["name"] for d in rendered() if d["kind"] == "NetworkPolicy"] == [
        "airlock-default-deny"
    ]


def test_the_sandbox_namespace_gets_the_quota_and_limit_range_asked_for() -> None:
    docs = rendered(CHART / "examples" / "gvisor.yaml")
    quota, limits = of_kind(docs, "ResourceQuota"), of_kind(docs, "LimitRange")
    assert quota["metadata"]["namespace"] == limits["metadata"]["namespace"] == "airlock-sandboxes"
    assert quota["spec"]["hard"] == {
        "requests.cpu": "16",
        "requests.memory": "32Gi",
        "limits.cpu": "16",
        "limits.memory": "32Gi",
        "pods": "40",
    }
    assert limits["spec"]["limits"] == [{"type": "Container", "max": {"cpu": "4", "memory": "8Gi"}}]


def test_the_controller_policy_admits_only_its_namespace_and_the_peers_named() -> None:
    docs = rendered(CHART / "examples" / "gvisor.yaml")
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["namespace"] == "airlock"]
    deployment = of_kind(docs, "Deployment")
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rule, web, metrics = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"podSelector": {}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}},
    ]
    assert rule["ports"] == [{"port": "grpc", "protocol": "TCP"}]
    # The HTTP API and console: whom gRPC admits (and web.networkPolicyFrom, none here).
    assert web == {"from": rule["from"], "ports": [{"port": "http", "protocol": "TCP"}]}
    # The metrics port: its own rule (the release namespace and metrics.networkPolicyFrom).
    assert metrics == {"from": [{"podSelector": {}}], "ports": [{"port": "metrics", "protocol": "TCP"}]}


def test_an_agents_runtime_class_is_readable_by_name_and_reaches_its_placement(tmp_path: Path) -> None:
    """Per-agent placement (a GPU pool): the agent's RuntimeClass joins the ClusterRole's
    resourceNames, and the rendered config carries the placement to the backend."""
    values = tmp_path / "gpu.yaml"
    gpu = {
        "provider": {"kind": "scripted", "script": [{"text": "hi"}]},
        "isolation": ["container"],
        "placement": {
            "runtime_class": "nvidia",
            "node_selector": {"pool": "gpu"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    values.write_text(yaml.safe_dump({"agents": {"gpu": gpu}}))
    docs = rendered(values)
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    (classes,) = [r for r in cluster_role["rules"] if r["resources"] == ["runtimeclasses"]]
    assert classes["resourceNames"] == ["gvisor", "kata", "nvidia"]
    (found,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config")]
    config_file = tmp_path / "airlock.yaml"
    config_file.write_text(found["data"]["airlock.yaml"])
    loaded = load_config(config_file)
    settings = loaded.settings_of("kubernetes")
    assert isinstance(settings, KubernetesSettings) and "nvidia" in settings.placement_runtime_classes
    placement = loaded.agents["gpu"].placement
    assert placement is not None and placement.runtime_class == "nvidia"
    assert dict(placement.node_selector) == {"pool": "gpu"}

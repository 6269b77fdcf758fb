"""The Helm chart renders, offline, only what an operator can trust: ``helm lint --strict``
passes; every object of the default and example values is valid against the official
Kubernetes schemas (strict, oldest and newest supported versions); golden files show what an
install creates; the controller runs hardened with exactly the access the backend uses.

None of this proves a cluster admits the pods or enforces the NetworkPolicies: that is what
``helm test`` (the isolation probe) is for, on the cluster itself.
"""

from __future__ import annotations

import base64
import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils as kubernetes_validate_utils
import pytest
import yaml

from airlock.sandbox.kubernetes import DOCTOR_ACCESS, SANDBOX_ACCESS, KubernetesSettings
from airlock.sandbox.kubernetes._access import chart_access, resolve, rules
from airlock.sandbox.kubernetes._names import DEFAULT_DENY_POLICY
from tests.support.helm import CHART, helm, objects, render

EXAMPLES = sorted((CHART / "examples").glob("*.yaml"))
CASES = {"default": (), **{p.stem: (p,) for p in EXAMPLES}}
GOLDEN = Path(__file__).resolve().parent / "golden"
VERSIONS = ("1.25", str(kubernetes_validate.latest_version()))


@pytest.fixture(scope="module", autouse=True)
def _schemas_read_once() -> Iterator[None]:
    """The validator re-reads its schema files on every call; read each once here."""
    original = kubernetes_validate_utils.schema_contents
    kubernetes_validate_utils.schema_contents = functools.cache(original)
    yield
    kubernetes_validate_utils.schema_contents = original


@functools.cache
def rendered(case: str) -> str:
    return render(*CASES[case])


def kinds(case: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects(rendered(case))}


def one(case: str, kind: str, suffix: str = "") -> dict[str, Any]:
    found = [o for (k, n), o in kinds(case).items() if k == kind and n.endswith(suffix)]
    assert len(found) == 1, f"{case}: {len(found)} {kind} named *{suffix}"
    return found[0]


def test_the_chart_exists_with_its_examples() -> None:
    assert (CHART / "Chart.yaml").exists() and (CHART / "values.schema.json").exists()
    assert {p.stem for p in EXAMPLES} >= {"multi-agent", "gvisor", "external-secrets", "replicas"}


@pytest.mark.parametrize("case", list(CASES))
def test_helm_lint_strict(case: str) -> None:
    args = ["lint", "--strict", str(CHART)]
    for values in CASES[case]:
        args += ["-f", str(values)]
    done = helm(*args)
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("case", list(CASES))
def test_every_rendered_object_is_valid_for_the_oldest_and_newest_kubernetes(case: str) -> None:
    rendered_objects = objects(rendered(case))
    assert len(rendered_objects) >= 9
    for obj in rendered_objects:
        for version in VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)


def stable(text: str) -> str:
    """The rendering with the values generated at each render (token, canary) masked."""
    docs = objects(text)
    for doc in docs:
        if doc.get("kind") == "Secret":
            data: dict[str, str] = doc.get("data") or {}
            for key in data:
                data[key] = "<generated at install>"
    return yaml.safe_dump_all(docs, sort_keys=False)


@pytest.mark.parametrize("case", list(CASES))
def test_golden(case: str) -> None:
    """What an install creates, reviewed as a diff. AIRLOCK_UPDATE_GOLDEN=1 rewrites them."""
    path = GOLDEN / f"{case}.yaml"
    text = stable(rendered(case))
    if os.environ.get("AIRLOCK_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, (
        f"{path.name} differs from the rendering; if intended, regenerate with AIRLOCK_UPDATE_GOLDEN=1"
    )


ACCESS_FILE = CHART / "files" / "controller-access.json"


def access_file_text() -> str:
    """The chart's copy of the access table: per connection mode, the Role's and ClusterRole's
    rules (one a line; ``resourceNames`` name the values that list the objects)."""
    lines = [
        "{",
        '  "//": "Written from airlock/sandbox/kubernetes/_access.py by tests/unit/chart '
        '(AIRLOCK_UPDATE_GOLDEN=1); do not edit.",',
    ]
    modes = list(chart_access().items())
    for i, (mode, scopes) in enumerate(modes):
        lines.append(f'  "{mode}": {{')
        for j, (scope, rule_list) in enumerate(scopes.items()):
            lines.append(f'    "{scope}": [')
            lines += [
                f"      {json.dumps(r)}" + ("," if k < len(rule_list) - 1 else "")
                for k, r in enumerate(rule_list)
            ]
            lines.append("    ]" + ("," if j < len(scopes) - 1 else ""))
        lines.append("  }" + ("," if i < len(modes) - 1 else ""))
    return "\n".join([*lines, "}", ""])


def test_the_charts_access_file_is_the_backends_table() -> None:
    """The Role is rendered from this file; it must say what the code's table says."""
    text = access_file_text()
    if os.environ.get("AIRLOCK_UPDATE_GOLDEN") == "1":
        ACCESS_FILE.write_text(text)
    assert ACCESS_FILE.read_text() == text, (
        f"{ACCESS_FILE.name} differs from the access table; regenerate with AIRLOCK_UPDATE_GOLDEN=1"
    )
    assert json.loads(text)["pod_ip"] == chart_access()["pod_ip"]


@pytest.mark.parametrize("case", list(CASES))
def test_the_role_grants_exactly_what_the_controller_calls(case: str) -> None:
    """The Role (sandbox namespace) and ClusterRole are exactly the backend's and doctor's access
    tables for the chart's settings and connection mode (pod IP: no port-forward), names filled
    in from the values, nothing that every identity has by default, no verb more."""
    settings = KubernetesSettings.model_validate(rendered_config(case)["backends"]["kubernetes"])
    assert settings.connect == "pod_ip"
    granted = [
        g
        for g in resolve(SANDBOX_ACCESS + DOCTOR_ACCESS, settings, "pod_ip").grants
        if g.default_role is None
    ]
    role = one(case, "Role", "-sandboxes")
    assert role["metadata"]["namespace"] == settings.namespace
    assert role["rules"] == rules(g for g in granted if g.namespace == settings.namespace)
    assert one(case, "ClusterRole")["rules"] == rules(g for g in granted if g.namespace is None)
    binding = one(case, "RoleBinding", "-sandboxes")
    assert binding["metadata"]["namespace"] == settings.namespace
    account = one(case, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "airlock"}]
    # No object of the chart's own grants anything wider.
    bindings = [
        n for (k, n) in kinds(case) if k == "ClusterRoleBinding" and not n.endswith("-probe-runtimeclasses")
    ]
    assert bindings == [one(case, "ClusterRole")["metadata"]["name"]]  # the helm test's own binding aside


def test_the_default_roles_name_what_they_grant() -> None:
    """What the tables above resolve to for the default values, spelled out: no port-forward,
    the warm pool's patch, RuntimeClasses and the namespace by name only."""
    role = {r["resources"][0]: r for r in one("default", "Role", "-sandboxes")["rules"]}
    assert "pods/portforward" not in role
    assert role["pods"]["verbs"] == ["create", "get", "list", "delete", "patch"]
    assert "resourceNames" not in role["secrets"]  # no pull Secrets: no get on any Secret
    cluster = one("default", "ClusterRole")["rules"]
    assert cluster == [
        {
            "apiGroups": ["node.k8s.io"],
            "resources": ["runtimeclasses"],
            "verbs": ["get"],
            "resourceNames": ["gvisor", "kata"],
        },
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["get", "patch"],  # patch: the enforcement proof's annotation
            "resourceNames": ["airlock-sandboxes"],
        },
    ]
    pull = {
        r["resources"][0]: r for r in one("gvisor", "Role", "-sandboxes")["rules"] if "resourceNames" in r
    }
    assert pull["secrets"] == {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["get", "update"],  # doctor reads them; the controller refreshes its copies
        "resourceNames": ["registry-pull"],
    }


@pytest.mark.parametrize("case", list(CASES))
def test_the_controller_runs_hardened(case: str) -> None:
    deployment = one(case, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if not any(e["name"] == "AIRLOCK_STORE" for e in container.get("env", [])):  # SQLite: one
        assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65534
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    # the kubelet's gRPC probe cannot speak TLS: with TLS the port is probed (test_chart_tls)
    probe_kind = "tcpSocket" if "--tls-cert" in container["args"] else "grpc"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe][probe_kind] == {"port": 7878}
    assert container["resources"]["limits"] and container["resources"]["requests"]
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    assert all("hostPath" not in v for v in pod["volumes"])
    args = container["args"]
    assert args[:2] == ["serve", "--config"] and args[args.index("--backend") + 1] == "kubernetes"
    assert args[args.index("--token-file") + 1] == "/var/run/airlock/token/token"


def test_the_sandbox_namespace_is_restricted_and_denies_by_default() -> None:
    namespace = one("default", "Namespace")
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    policy = one("default", "NetworkPolicy")
    assert policy["metadata"]["name"] == DEFAULT_DENY_POLICY
    assert policy["metadata"]["namespace"] == namespace["metadata"]["name"] == "airlock-sandboxes"
    assert policy["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    # A namespace managed elsewhere is referenced, not created; its policy still is.
    external = kinds("external-secrets")
    assert not [k for k in external if k[0] == "Namespace"]
    assert one("external-secrets", "NetworkPolicy")["metadata"]["namespace"] == "agents"


def rendered_config(case: str) -> dict[str, Any]:
    config_map = one(case, "ConfigMap", "-config")
    data: dict[str, Any] = yaml.safe_load(config_map["data"]["airlock.yaml"])
    return data


@pytest.mark.parametrize("case", list(CASES))
def test_the_backend_settings_match_the_objects(case: str) -> None:
    """The controller pods carry the labels the sandboxes admit; the settings name the sandbox
    namespace the Role and the default-deny live in; they load as KubernetesSettings."""
    settings = KubernetesSettings.model_validate(rendered_config(case)["backends"]["kubernetes"])
    template = one(case, "Deployment")["spec"]["template"]
    assert settings.controller_pod_labels.items() <= template["metadata"]["labels"].items()
    assert settings.controller_namespace == "airlock"
    assert one(case, "Role", "-sandboxes")["metadata"]["namespace"] == settings.namespace
    assert settings.in_cluster is True and settings.connect == "pod_ip"


def test_the_gvisor_example_schedules_sandboxes_on_its_pool() -> None:
    settings = KubernetesSettings.model_validate(rendered_config("gvisor")["backends"]["kubernetes"])
    assert settings.node_selector == {"airlock.dev/pool": "sandboxes"}
    assert [t.manifest() for t in settings.tolerations] == [
        {"key": "airlock.dev/sandboxes", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert settings.runtime_classes.micro_vm == "kata-qemu" and settings.workspace_medium == "Disk"
    assert settings.proxy.image == "registry.example.com/airlock-runner:0.1.0"
    assert settings.image == "registry.example.com/airlock-runner:0.1.0"
    probe_config = yaml.safe_load(one("gvisor", "ConfigMap", "-probe")["data"]["airlock.yaml"])
    assert probe_config["agents"]["airlock-probe-deny"]["isolation"] == ["gvisor"]


def test_secrets_are_only_referenced_and_mounted_as_files() -> None:
    """Provider keys come from existing Secrets, mounted read-only as files the config names;
    the chart never holds a key's value."""
    config = rendered_config("multi-agent")
    assert config["secrets"]["anthropic-api-key"] == {"file": "/var/run/airlock/secrets/anthropic-api-key"}
    pod = one("multi-agent", "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "secrets"]
    sources = {s["secret"]["name"]: s["secret"]["items"] for s in volume["projected"]["sources"]}
    assert sources == {
        "model-keys": [{"key": "anthropic", "path": "anthropic-api-key"}],
        "github": [{"key": "token", "path": "github-token"}],
    }
    secrets = [o for (k, _), o in kinds("external-secrets").items() if k == "Secret"]
    assert secrets == [], "with an existing token Secret and no probe, the chart creates no Secret"


def test_the_generated_token_is_random_per_install() -> None:
    """Each install generates its own token (an upgrade keeps the one in the cluster, by
    ``lookup``, which needs a cluster to show)."""
    tokens = set()
    for _ in range(2):
        secret = one("default", "Secret", "-token")
        tokens.add(base64.b64decode(secret["data"]["token"]))
        rendered.cache_clear()
    assert len(tokens) == 2 and all(len(t) >= 40 for t in tokens)


def test_the_notes_print_the_token_only_when_asked() -> None:
    """``helm install`` needs a cluster to render NOTES; the template's two branches are
    checked here: the command that reads the Secret by default, the value only when asked."""
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    printing = notes.index("export AIRLOCK_TOKEN={{ include")
    guard = notes.rindex("{{- if", 0, printing)
    assert notes[guard:printing].startswith(
        "{{- if and .Values.auth.showTokenInNotes (not .Values.auth.existingSecret) }}"
    )
    assert "get secret" in notes[printing:]


def test_the_old_service_monitor_switch_says_where_it_moved() -> None:
    done = helm("template", "rel", str(CHART), "--set", "serviceMonitor.enabled=true", check=False)
    assert done.returncode != 0 and "moved to metrics.serviceMonitor.enabled" in done.stderr


def test_the_isolation_test_is_a_helm_test_hook() -> None:
    probe = one("default", "Pod", "-isolation-test")
    assert probe["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = probe["spec"]["containers"]
    args = container["args"]
    assert args[0] == "probe"
    assert args[args.index("--deny-agent") + 1] == "airlock-probe-deny"
    assert args[args.index("--allow-agent") + 1] == "airlock-probe-allow"
    targets = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--target")
    assert list(targets) == ["controller", "kubernetes-api", "node", "metadata", "metadata-ipv6"]
    assert targets["metadata"] == "169.254.169.254:80" and targets["metadata-ipv6"] == "[fd00:ec2::254]:80"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # It serves its own agents: it holds no jobs-API token, only its hook config and canary.
    assert args[1:3] == ["--serve-config", "/etc/airlock-probe/airlock.yaml"]
    assert "--token-file" not in args and "--controller" not in args
    secrets = {v["secret"]["secretName"] for v in probe["spec"]["volumes"] if "secret" in v}
    assert secrets == {"rel-airlock-probe-canary"}
    # Every object the test needs exists only as a test hook, the access it grants included.
    hooks = [
        o for o in objects(rendered("default")) if "helm.sh/hook" in o["metadata"].get("annotations", {})
    ]
    assert {(o["kind"], o["metadata"]["name"]) for o in hooks} == {
        ("ConfigMap", "rel-airlock-probe"),
        ("ServiceAccount", "rel-airlock-probe"),
        ("RoleBinding", "rel-airlock-probe"),
        ("ClusterRoleBinding", "rel-airlock-airlock-probe-runtimeclasses"),
        ("Service", "rel-airlock-probe"),
        ("Pod", "rel-airlock-isolation-test"),
    }
    assert all(o["metadata"]["annotations"]["helm.sh/hook"] == "test" for o in hooks)
    deployment = one("default", "Deployment")["spec"]["template"]["spec"]
    assert "probe" not in yaml.safe_dump(deployment["volumes"])  # no canary in production
    service = one("default", "Service", "-probe")
    assert service["spec"]["clusterIP"] == "None"
    assert not [k for k in kinds("external-secrets") if k[1].endswith(("-isolation-test", "-probe-canary"))]

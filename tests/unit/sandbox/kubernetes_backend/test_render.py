"""The Kubernetes renderers: golden files for representative plans, and the security
properties asserted directly.

The golden files under ``golden/`` hold every object one sandbox consists of, as multi-document
YAML (``yaml.safe_dump_all``, ``sort_keys=True``), in the order: default-deny policy, the
sandbox's NetworkPolicies, Secret, proxy Secret, proxy pod, sandbox pod. After an intended
change to the renderers, regenerate them and review the diff::

    AIRLOCK_UPDATE_GOLDEN=1 pytest tests/unit/sandbox/kubernetes_backend/test_render.py
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.policy import ClusterService, ResolvedCredentials, SandboxPlan, compile_plan
from airlock.policy.decision import SPECIAL_RANGES, net_within
from airlock.proxy.bundle import BundleConfig
from airlock.sandbox import resolve_limits
from airlock.sandbox._isolation import requested_isolation
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.sandbox.kubernetes._names import (
    CREDENTIAL_PORT_BASE,
    EGRESS_PORT,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_ROLE,
    LABEL_SANDBOX,
    MANAGED_BY,
    RUNNER_PORT,
    Owner,
)
from airlock.sandbox.kubernetes._render import (
    SandboxShape,
    bundle_config,
    credential_ports,
    needs_proxy,
    proxy_urls,
    render_default_deny,
    render_network_policies,
    render_pod,
    render_proxy_pod,
    render_proxy_secret,
    render_secret,
)
from airlock.sandbox.kubernetes._runner_tls import RunnerCertificate
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    GvisorIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    ResourceLimits,
)

GOLDEN = Path(__file__).resolve().parent / "golden"
SANDBOX_ID = "sb-0123456789abcdef"
OWNER = Owner(name="airlock-owner-test", uid="11111111-2222-3333-4444-555555555555")
IMAGE = "registry.example/airlock-runner:1.0"
CONTROLLER_NAMESPACE = "airlock-system"
TOKEN = "runner-token-for-tests"
#: A recognisable stand-in for a runner's certificate and key (golden files stay stable).
CERTIFICATE = RunnerCertificate(
    cert_pem=b"-----BEGIN CERTIFICATE-----\nrunner-certificate-for-tests\n-----END CERTIFICATE-----\n",
    key_pem=b"-----BEGIN PRIVATE KEY-----\nrunner-key-for-tests\n-----END PRIVATE KEY-----\n",
)
PROXY_IP = "10.244.1.7"
ALLOW, DENY = NetworkAction.ALLOW, NetworkAction.DENY
#: An in-cluster Service whose pods listen on another port than the Service's.
SEARCH = ClusterService(name="search", namespace="tools", pods={"app": "search"}, target_port=8080)


def rule(destination: str, action: NetworkAction = ALLOW, port: int | None = None) -> NetworkRule:
    return NetworkRule(destination=destination, port=port, action=action)


def network(*rules: NetworkRule, default: NetworkAction = DENY) -> NetworkPolicy:
    return NetworkPolicy(default=default, rules=list(rules))


def secret_value(name: str) -> str:
    """A recognisable stand-in for a credential's value."""
    return f"secret-value-of-{name}"


def shape_for(
    spec: EnvironmentSpec,
    settings: KubernetesSettings | None = None,
    *,
    active_deadline_s: int | None = None,
    sandbox_id: str = SANDBOX_ID,
) -> SandboxShape:
    """The shape of a sandbox for ``spec``, as the backend builds it (fixed ids)."""
    chosen = settings or KubernetesSettings()
    kind = requested_isolation(spec, "kubernetes").kind
    runtime_class = {
        "container": None,
        "gvisor": chosen.runtime_classes.gvisor,
        "micro_vm": chosen.runtime_classes.micro_vm,
    }[kind]
    return SandboxShape(
        sandbox_id=sandbox_id,
        namespace=chosen.namespace,
        owner=OWNER,
        settings=chosen,
        image=IMAGE,
        plan=compile_plan(spec),
        limits=resolve_limits(spec),
        runtime_class=runtime_class,
        active_deadline_s=active_deadline_s,
        controller_namespace=CONTROLLER_NAMESPACE,
    )


def credentials_for(plan: SandboxPlan) -> ResolvedCredentials:
    return ResolvedCredentials(values={c.name: secret_value(c.name) for c in plan.credentials})


def render_all(shape: SandboxShape) -> list[dict[str, Any]]:
    """Every object of the sandbox (and the namespace's default-deny policy), in creation order."""
    credentials = credentials_for(shape.plan)
    objects = [render_default_deny(shape.namespace), *render_network_policies(shape)]
    objects.append(render_secret(shape, TOKEN, credentials, CERTIFICATE))
    proxy_ip = None
    if needs_proxy(shape.plan):
        objects += [render_proxy_secret(shape, credentials), render_proxy_pod(shape)]
        proxy_ip = PROXY_IP
    objects.append(render_pod(shape, proxy_ip=proxy_ip))
    return objects


def _cases() -> dict[str, tuple[EnvironmentSpec, KubernetesSettings, int | None]]:
    anthropic = CredentialRef(name="anthropic-api-key", injection=CredentialInjection.sidecar())
    return {
        "deny_all": (EnvironmentSpec(), KubernetesSettings(), None),
        "domain_sidecar": (
            EnvironmentSpec(
                network=network(rule("api.anthropic.com", port=443), rule("*.pypi.org", port=443)),
                credentials=[anthropic],
            ),
            KubernetesSettings(),
            600,
        ),
        "cidr_rules": (
            EnvironmentSpec(
                network=network(
                    rule("10.0.0.0/8", port=5432),
                    rule("10.1.0.0/16", DENY),
                    rule("10.2.0.0/16", DENY, port=22),
                    rule("2606:4700::/32", port=443),
                )
            ),
            KubernetesSettings(),
            None,
        ),
        "env_file_credentials": (
            EnvironmentSpec(
                network=network(rule("api.github.com", port=443)),
                credentials=[
                    CredentialRef(name="github-token", injection=CredentialInjection.env_var("GITHUB_TOKEN")),
                    CredentialRef(name="netrc", injection=CredentialInjection.file("/home/agent/.netrc")),
                ],
            ),
            KubernetesSettings(),
            None,
        ),
        "gvisor_gpu_disk": (
            EnvironmentSpec(
                isolation=[GvisorIsolation()],
                resources=ResourceLimits(cpu="2", memory="4Gi", disk="10Gi", gpu="1"),
            ),
            KubernetesSettings(
                workspace_medium="Disk",
                node_selector={"airlock.dev/pool": "gpu"},
                image_pull_secrets=("registry-pull",),
                image_pull_policy="Always",
            ),
            900,
        ),
        "default_allow": (
            EnvironmentSpec(
                network=network(rule("1.2.3.0/24", DENY), rule("tracker.example.com", DENY), default=ALLOW)
            ),
            KubernetesSettings(),
            None,
        ),
    }


def _service_cases() -> dict[str, tuple[EnvironmentSpec, KubernetesSettings, int | None]]:
    """In-cluster Service destinations (selector peers), in a cluster with its own domain."""
    cache = ClusterService(name="cache", namespace="tools")
    rules = (rule(SEARCH.destination(), port=80), rule(cache.destination(), port=6379))
    spec = EnvironmentSpec(network=network(*rules, rule("api.github.com", port=443)))
    return {"cluster_service": (spec, KubernetesSettings(cluster_domain="corp.internal"), None)}


CASES = {**_cases(), **_service_cases()}


def case_shape(name: str) -> SandboxShape:
    spec, settings, deadline = CASES[name]
    return shape_for(spec, settings, active_deadline_s=deadline)


def dump(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    text = dump(render_all(case_shape(name)))
    assert "&id" not in text  # no object shares a nested dict with another (YAML anchors)
    path = GOLDEN / f"{name}.yaml"
    if os.environ.get("AIRLOCK_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, (
        f"{path.name} differs from the rendering; if intended, regenerate with AIRLOCK_UPDATE_GOLDEN=1"
    )


# --- helpers for the property tests --------------------------------------------------------


def walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair in a nested structure."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"] if c["name"] == name
    ]
    assert len(found) == 1
    return found[0]


def proxy_policy(shape: SandboxShape) -> dict[str, Any]:
    policies = render_network_policies(shape)
    assert len(policies) == 2
    return policies[1]


def admits(policy: dict[str, Any], ip: str, port: int) -> bool:
    """Whether the policy's egress rules let the pod reach ``ip:port`` through an ipBlock."""
    address = ipaddress.ip_address(ip)
    for egress in policy["spec"]["egress"]:
        ports = [p["port"] for p in egress.get("ports", [])]
        if ports and port not in ports:
            continue
        for peer in egress["to"]:
            block = peer.get("ipBlock")
            if block is None:
                continue
            cidr = ipaddress.ip_network(block["cidr"])
            if address.version != cidr.version or address not in cidr:
                continue
            if not any(address in ipaddress.ip_network(e) for e in block.get("except", [])):
                return True
    return False


def has_dns(policy: dict[str, Any]) -> bool:
    return any(p.get("port") == 53 for egress in policy["spec"]["egress"] for p in egress.get("ports", []))


# --- security properties ----------------------------------------------------------------------


def test_sidecar_secret_is_only_in_the_proxy_secret() -> None:
    shape = case_shape("domain_sidecar")
    value = secret_value("anthropic-api-key")
    encoded = base64.b64encode(value.encode()).decode()
    holders = []
    for obj in render_all(shape):
        text = json.dumps(obj)
        if value in text or encoded in text:
            holders.append((obj["kind"], obj["metadata"]["name"]))
    assert holders == [("Secret", f"airlock-{SANDBOX_ID}-proxy")]
    proxy_secret = render_proxy_secret(shape, credentials_for(shape.plan))
    port = credential_ports(shape.plan)["anthropic-api-key"]
    assert base64.b64decode(proxy_secret["data"][f"secret-{port}"]).decode() == value


def test_sandbox_secret_holds_the_token_and_only_env_and_file_credentials() -> None:
    spec = EnvironmentSpec(
        network=network(rule("api.anthropic.com", port=443)),
        credentials=[
            CredentialRef(name="anthropic-api-key", injection=CredentialInjection.sidecar()),
            CredentialRef(name="db-password", injection=CredentialInjection.env_var("DB_PASSWORD")),
            CredentialRef(name="ssh-key", injection=CredentialInjection.file("/home/agent/.ssh/id")),
        ],
    )
    shape = shape_for(spec)
    secret = render_secret(shape, TOKEN, credentials_for(shape.plan), CERTIFICATE)
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {
        "token": TOKEN,
        "tls.crt": CERTIFICATE.cert_pem.decode(),
        "tls.key": CERTIFICATE.key_pem.decode(),
        "cred-1": secret_value("db-password"),
        "cred-2": secret_value("ssh-key"),
    }
    assert secret["type"] == "Opaque"


def test_the_runner_never_mounts_the_token_secret() -> None:
    for name in CASES:
        pod = render_pod(case_shape(name), proxy_ip=PROXY_IP if needs_proxy(case_shape(name).plan) else None)
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        token_volumes = {
            v["name"]
            for v in volumes.values()
            if "secret" in v
            and any(i["key"] == "token" for i in v["secret"].get("items", [{"key": "token"}]))
        }
        assert token_volumes == {"token"}
        runner = container(pod, "runner")
        assert not {m["name"] for m in runner["volumeMounts"]} & token_volumes
        assert not any(
            key == "secretKeyRef" and ref["key"] == "token" for key, ref in walk(runner.get("env", []))
        )
        init = container(pod, "token")
        assert {"name": "token", "mountPath": "/run/airlock-secret", "readOnly": True} in init["volumeMounts"]
        # The runner reads the copy from the shared in-memory directory and deletes it.
        assert runner["args"] == [
            "--listen",
            f"[::]:{RUNNER_PORT}",
            "--token-file",
            "/run/airlock/token",
            "--token-file-delete",
            "--workspace",
            "/workspace",
            "--tls-cert",
            "/run/airlock-tls/tls.crt",
            "--tls-key",
            "/run/airlock-tls/tls.key",
        ]
        control = volumes["control"]["emptyDir"]
        assert control == {"medium": "Memory", "sizeLimit": "1Mi"}


def test_the_token_copy_creates_a_read_only_file_once(tmp_path: Path) -> None:
    pod = render_pod(case_shape("deny_all"), proxy_ip=None)
    program = container(pod, "token")["command"]
    assert program[:2] == ["/opt/venv/bin/python", "-c"]
    source_dir, control_dir = tmp_path / "secret", tmp_path / "control"
    source_dir.mkdir()
    control_dir.mkdir()
    (source_dir / "token").write_text(TOKEN)
    script = program[2].replace("/run/airlock/token", str(control_dir / "token"))
    script = script.replace("/run/airlock-secret", str(source_dir))
    subprocess.run([sys.executable, "-c", script], check=True)
    copy = control_dir / "token"
    assert copy.read_text() == TOKEN
    assert stat.S_IMODE(copy.stat().st_mode) == 0o400
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert again.returncode != 0 and "FileExistsError" in again.stderr


def test_deny_all_has_no_egress_and_no_proxy() -> None:
    shape = case_shape("deny_all")
    assert not needs_proxy(shape.plan)
    policies = render_network_policies(shape)
    assert len(policies) == 1
    assert policies[0]["spec"]["egress"] == []
    assert policies[0]["spec"]["policyTypes"] == ["Ingress", "Egress"]
    pod = render_pod(shape, proxy_ip=None)
    names = {e["name"] for e in container(pod, "runner")["env"]}
    assert not names & {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"}
    with pytest.raises(ValueError, match="needs no proxy"):
        render_pod(shape, proxy_ip=PROXY_IP)


def test_sandbox_ingress_is_only_the_controller_and_egress_only_its_proxy() -> None:
    shape = case_shape("domain_sidecar")
    sandbox_policy = render_network_policies(shape)[0]["spec"]
    assert sandbox_policy["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": CONTROLLER_NAMESPACE}
                    },
                    "podSelector": {"matchLabels": shape.settings.controller_pod_labels},
                }
            ],
            "ports": [{"protocol": "TCP", "port": RUNNER_PORT}],
        }
    ]
    proxy_selector = {"matchLabels": {LABEL_SANDBOX: SANDBOX_ID, LABEL_ROLE: "proxy"}}
    assert sandbox_policy["egress"] == [
        {
            "to": [{"podSelector": proxy_selector}],
            "ports": [
                {"protocol": "TCP", "port": EGRESS_PORT},
                {"protocol": "TCP", "port": CREDENTIAL_PORT_BASE},
            ],
        }
    ]
    ingress = proxy_policy(shape)["spec"]["ingress"]
    sandbox_selector = {"matchLabels": {LABEL_SANDBOX: SANDBOX_ID, LABEL_ROLE: "sandbox"}}
    assert ingress == [
        {"from": [{"podSelector": sandbox_selector}], "ports": sandbox_policy["egress"][0]["ports"]}
    ]


def test_the_proxy_is_required_when_the_plan_needs_it() -> None:
    shape = case_shape("domain_sidecar")
    with pytest.raises(ValueError, match="proxy_ip"):
        render_pod(shape, proxy_ip=None)
    env = {
        e["name"]: e.get("value") for e in container(render_pod(shape, proxy_ip=PROXY_IP), "runner")["env"]
    }
    url = f"http://{PROXY_IP}:{EGRESS_PORT}"
    assert {k: env[k] for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")} == dict.fromkeys(
        ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), url
    )
    assert env["NO_PROXY"] == env["no_proxy"] == PROXY_IP
    assert proxy_urls(shape.plan, PROXY_IP) == {
        "anthropic-api-key": f"http://{PROXY_IP}:{CREDENTIAL_PORT_BASE}"
    }
    assert proxy_urls(shape.plan, "fd00::7") == {
        "anthropic-api-key": f"http://[fd00::7]:{CREDENTIAL_PORT_BASE}"
    }


def test_no_host_access_anywhere() -> None:
    for name in CASES:
        for obj in render_all(case_shape(name)):
            keys = dict(walk(obj))
            assert "hostPath" not in keys
            assert "hostPort" not in keys
            if obj["kind"] == "Pod":
                spec = obj["spec"]
                assert spec["hostNetwork"] is spec["hostPID"] is spec["hostIPC"] is False
                assert spec["automountServiceAccountToken"] is False
                assert spec["securityContext"]["runAsNonRoot"] is True
                for c in spec.get("initContainers", []) + spec["containers"]:
                    security = c["securityContext"]
                    assert security["privileged"] is False
                    assert security["allowPrivilegeEscalation"] is False
                    assert security["readOnlyRootFilesystem"] is True
                    assert security["capabilities"] == {"drop": ["ALL"]}
                    assert security["runAsUser"] == 65534
                    res = c["resources"]
                    assert res["requests"] == res["limits"]


def test_dns_only_when_names_must_resolve() -> None:
    cidr_only = shape_for(EnvironmentSpec(network=network(rule("10.0.0.0/8"))))
    assert not has_dns(proxy_policy(cidr_only))
    assert not has_dns(render_network_policies(case_shape("deny_all"))[0])
    for name in ("domain_sidecar", "env_file_credentials", "default_allow"):
        policy = proxy_policy(case_shape(name))
        dns = policy["spec"]["egress"][0]
        assert dns == {
            "to": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        }
    for name in CASES:
        shape = case_shape(name)
        policies = render_network_policies(shape)
        assert not has_dns(policies[0])  # the sandbox never resolves anything
        pod = render_pod(shape, proxy_ip=PROXY_IP if needs_proxy(shape.plan) else None)
        assert pod["spec"]["dnsPolicy"] == "None"


METADATA = "169.254.169.254"


@pytest.mark.parametrize(
    "rules",
    [
        [rule("api.example.com")],
        [rule("*.example.com", port=443)],
        [rule("*")],
        [rule("0.0.0.0/0")],
        [rule("::/0"), rule("0.0.0.0/0", port=80)],
        [rule("10.0.0.0/8"), rule("example.com")],
    ],
)
def test_metadata_and_special_ranges_are_never_granted_by_names_or_everything(
    rules: list[NetworkRule],
) -> None:
    for default in (ALLOW, DENY):
        shape = shape_for(EnvironmentSpec(network=network(*rules, default=default)))
        policy = proxy_policy(shape)
        for port in (80, 443, 5432):
            assert not admits(policy, METADATA, port)
            assert not admits(policy, "127.0.0.1", port)
            assert not admits(policy, "fd00::1", port)
            assert not admits(policy, "192.168.1.1", port)
            assert not admits(policy, "::ffff:169.254.169.254", port)
        granted_by_cidr = [r for r in rules if "/" in r.destination and not r.destination.endswith("/0")]
        assert admits(policy, "10.9.9.9", 443) == bool(granted_by_cidr)
        assert any(admits(policy, "93.184.216.34", port) for port in (80, 443))  # a public address


def test_a_cidr_rule_inside_the_metadata_range_grants_it() -> None:
    shape = shape_for(EnvironmentSpec(network=network(rule("169.254.169.254/32", port=80))))
    policy = proxy_policy(shape)
    assert admits(policy, METADATA, 80)
    assert not admits(policy, METADATA, 443)
    assert not admits(policy, "169.254.169.253", 80)


def test_cidr_rules_become_ip_blocks_less_the_denies_inside() -> None:
    policy = proxy_policy(case_shape("cidr_rules"))
    egress = policy["spec"]["egress"]
    assert egress == [
        {
            "to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
            "ports": [{"protocol": "TCP", "port": 5432}],
        },
        {"to": [{"ipBlock": {"cidr": "2606:4700::/32"}}], "ports": [{"protocol": "TCP", "port": 443}]},
    ]
    # A deny on another port (10.2.0.0/16:22) cannot be excepted without refusing 5432 there too.
    assert admits(policy, "10.2.0.1", 5432)
    assert not admits(policy, "10.1.0.1", 5432)


def test_public_addresses_for_names_with_ports_and_denies() -> None:
    spec = EnvironmentSpec(
        network=network(
            rule("api.example.com", port=443),
            rule("*.example.org", port=8443),
            rule("198.51.100.0/24", DENY),  # inside a special range: already excepted
            rule("8.8.8.0/24", DENY),
            rule("9.9.9.0/24", DENY, port=22),
        )
    )
    policy = proxy_policy(shape_for(spec))
    public = policy["spec"]["egress"][1]
    assert public["ports"] == [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 8443}]
    v4, v6 = (peer["ipBlock"] for peer in public["to"])
    assert v4["cidr"] == "0.0.0.0/0" and v6["cidr"] == "::/0"
    assert "8.8.8.0/24" in v4["except"]
    assert "9.9.9.0/24" not in v4["except"]
    for _, special in SPECIAL_RANGES:
        block = v4 if special.version == 4 else v6
        assert any(net_within(special, ipaddress.ip_network(e)) for e in block["except"])
    assert not admits(policy, "8.8.8.8", 443)
    assert admits(policy, "1.1.1.1", 8443)
    assert not admits(policy, "1.1.1.1", 80)


def test_default_allow_or_a_portless_name_opens_every_port() -> None:
    for spec in (
        EnvironmentSpec(network=network(default=ALLOW)),
        EnvironmentSpec(network=network(rule("a.example.com", port=443), rule("b.example.com"))),
    ):
        public = proxy_policy(shape_for(spec))["spec"]["egress"][-1]
        assert "ports" not in public
        assert {peer["ipBlock"]["cidr"] for peer in public["to"]} == {"0.0.0.0/0", "::/0"}


def test_all_gpus_are_refused() -> None:
    shape = shape_for(EnvironmentSpec(resources=ResourceLimits(gpu="all")))
    with pytest.raises(EnvError) as caught:
        render_pod(shape, proxy_ip=None)
    assert caught.value.kind == "resource_exceeded"
    assert "all" in caught.value.message and "GPU" in caught.value.message


def test_resources_and_workspace() -> None:
    memory_pod = render_pod(
        shape_for(EnvironmentSpec(resources=ResourceLimits(cpu="0.5", memory="1Gi"))), proxy_ip=None
    )
    amounts = container(memory_pod, "runner")["resources"]["limits"]
    assert amounts == {"cpu": "500m", "memory": str(2**30)}
    volumes = {v["name"]: v for v in memory_pod["spec"]["volumes"]}
    assert volumes["workspace"]["emptyDir"] == {"medium": "Memory", "sizeLimit": str(256 * 2**20)}
    assert volumes["tmp"]["emptyDir"] == {"medium": "Memory", "sizeLimit": str(64 * 2**20)}

    disk_pod = render_pod(case_shape("gvisor_gpu_disk"), proxy_ip=None)
    amounts = container(disk_pod, "runner")["resources"]["requests"]
    assert amounts == {
        "cpu": "2000m",
        "memory": str(4 * 2**30),
        "nvidia.com/gpu": "1",
        "ephemeral-storage": str(10 * 2**30),
    }
    volumes = {v["name"]: v for v in disk_pod["spec"]["volumes"]}
    assert volumes["workspace"]["emptyDir"] == {"sizeLimit": str(10 * 2**30)}
    assert disk_pod["spec"]["runtimeClassName"] == "gvisor"
    assert disk_pod["spec"]["activeDeadlineSeconds"] == 900
    assert disk_pod["spec"]["nodeSelector"] == {"airlock.dev/pool": "gpu"}
    assert disk_pod["spec"]["imagePullSecrets"] == [{"name": "registry-pull"}]
    assert "runtimeClassName" not in memory_pod["spec"]


def test_the_proxy_pod_runs_without_runtime_class_and_reads_its_secret() -> None:
    spec, settings, _ = CASES["domain_sidecar"]
    shape = shape_for(
        spec.model_copy(update={"isolation": [GvisorIsolation()]}), settings, active_deadline_s=60
    )
    assert shape.runtime_class == "gvisor"
    pod = render_proxy_pod(shape)
    assert "runtimeClassName" not in pod["spec"]
    assert pod["spec"]["activeDeadlineSeconds"] == 60
    proxy = container(pod, "proxy")
    assert proxy["command"] + proxy["args"] == [
        "/opt/venv/bin/python",
        "-m",
        "airlock.proxy",
        "bundle",
        "--config",
        "/run/airlock-proxy/config.json",
    ]
    assert [p["containerPort"] for p in proxy["ports"]] == [EGRESS_PORT, CREDENTIAL_PORT_BASE]
    secret_volume = next(v for v in pod["spec"]["volumes"] if "secret" in v)["secret"]
    assert secret_volume == {"secretName": f"airlock-{SANDBOX_ID}-proxy", "defaultMode": 0o400}
    assert {"name": "config", "mountPath": "/run/airlock-proxy", "readOnly": True} in proxy["volumeMounts"]


def test_bundle_config_points_at_the_proxy_secret_files() -> None:
    shape = case_shape("domain_sidecar")
    config = bundle_config(shape)
    assert config.egress_port == EGRESS_PORT
    assert config.plan == shape.plan.egress
    assert config.clients == ()
    assert config.events == ("stdout",)
    [listener] = config.credentials
    assert listener.credential == "anthropic-api-key"
    assert listener.port == CREDENTIAL_PORT_BASE
    secret = render_proxy_secret(shape, credentials_for(shape.plan))
    key = Path(listener.secret_file).name
    assert listener.secret_file == f"/run/airlock-proxy/{key}"
    assert set(secret["data"]) == {"config.json", key}
    stored = BundleConfig.model_validate_json(base64.b64decode(secret["data"]["config.json"]))
    assert stored == config


def test_credentials_reach_the_runner_by_reference() -> None:
    shape = case_shape("env_file_credentials")
    pod = render_pod(shape, proxy_ip=PROXY_IP)
    runner = container(pod, "runner")
    env = {e["name"]: e for e in runner["env"]}
    assert env["GITHUB_TOKEN"] == {
        "name": "GITHUB_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": f"airlock-{SANDBOX_ID}", "key": "cred-0"}},
    }
    assert {
        "name": "credentials",
        "mountPath": "/home/agent/.netrc",
        "subPath": "cred-1",
        "readOnly": True,
    } in (runner["volumeMounts"])
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "credentials")
    assert volume["secret"]["items"] == [{"key": "cred-1", "path": "cred-1", "mode": 0o400}]
    assert secret_value("github-token") not in json.dumps(pod)


def test_every_object_is_owned_and_labelled() -> None:
    for name in CASES:
        shape = case_shape(name)
        default_deny, *objects = render_all(shape)
        assert default_deny["metadata"]["labels"] == {LABEL_MANAGED: MANAGED_BY}
        assert default_deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        for obj in objects:
            meta = obj["metadata"]
            assert meta["namespace"] == shape.namespace
            assert meta["ownerReferences"] == [OWNER.reference()]
            role = "proxy" if meta["name"].endswith("-proxy") else "sandbox"
            assert meta["labels"] == {
                LABEL_MANAGED: MANAGED_BY,
                LABEL_SANDBOX: SANDBOX_ID,
                LABEL_ROLE: role,
                LABEL_OWNER: OWNER.name,
            }


def test_tolerations_and_the_proxy_settings_reach_both_pods() -> None:
    """A tainted node pool's toleration goes on the sandbox and the proxy pod; the proxy pod
    takes its own image and size when the settings name them."""
    from airlock.sandbox.kubernetes import ProxySettings, Toleration

    settings = KubernetesSettings(
        tolerations=(
            Toleration(key="airlock.dev/gvisor", value="true", effect="NoSchedule"),
            Toleration(operator="Exists", effect="NoExecute", toleration_seconds=30),
        ),
        proxy=ProxySettings(image="registry.example/airlock-proxy:1", cpu="100m", memory="64Mi"),
    )
    shape = shape_for(EnvironmentSpec(network=network(rule("10.1.2.0/24", port=443))), settings)
    expected = [
        {"key": "airlock.dev/gvisor", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ]
    pod, proxy = render_pod(shape, proxy_ip="10.0.0.9"), render_proxy_pod(shape)
    assert pod["spec"]["tolerations"] == expected == proxy["spec"]["tolerations"]
    assert container(proxy, "proxy")["image"] == "registry.example/airlock-proxy:1"
    assert container(proxy, "proxy")["resources"]["limits"] == {"cpu": "100m", "memory": "64Mi"}
    assert container(pod, "runner")["image"] == IMAGE
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        ProxySettings(memory="lots")


def test_a_service_rule_is_a_selector_peer_on_the_pods_port_never_an_ipblock() -> None:
    shape = case_shape("cluster_service")
    proxy_policy = render_network_policies(shape)[1]
    egress = proxy_policy["spec"]["egress"]
    search = {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tools"}},
                "podSelector": {"matchLabels": {"app": "search"}},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 8080}],  # the pods' port, not the Service's 80
    }
    cache = {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tools"}},
                "podSelector": {},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 6379}],
    }
    assert search in egress and cache in egress
    blocks = [ipaddress.ip_network(p["ipBlock"]["cidr"]) for r in egress for p in r["to"] if "ipBlock" in p]
    # Only the public blocks of the name rule (443): no block for the Services' ports.
    public = [r for r in egress if any("ipBlock" in p for p in r["to"])]
    assert [r["ports"] for r in public] == [[{"protocol": "TCP", "port": 443}]]
    assert all(b.prefixlen == 0 for b in blocks)
    config = bundle_config(shape)
    assert (config.plan.cluster_domain, config.plan.cluster_namespace) == ("corp.internal", shape.namespace)

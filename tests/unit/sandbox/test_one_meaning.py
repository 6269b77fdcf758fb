"""One EnvironmentSpec, one meaning on Docker and on Kubernetes.

For each spec of the table, both backends' pure renderings are reduced to the same effective
policy and compared: which destinations the egress proxy admits (the plan each proxy bundle
is configured with) and whether there is a proxy at all; where each credential goes (a
variable or a file in the sandbox, or the proxy only); the hardening; the limits (CPU,
memory, workspace and /tmp sizes, GPUs); and the isolation (Docker runtime ↔ RuntimeClass).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airlock.policy import ResolvedCredentials, SandboxPlan, compile_plan
from airlock.proxy.bundle import BundleConfig
from airlock.sandbox import Limits, requested_isolation, resolve_limits
from airlock.sandbox.docker._config import container_config, resolve_boundary
from airlock.sandbox.docker._egress import EgressWiring
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.sandbox.kubernetes._names import Owner
from airlock.sandbox.kubernetes._render import (
    SandboxShape,
    bundle_config,
    needs_proxy,
    render_pod,
    render_proxy_secret,
    render_secret,
)
from airlock.sandbox.kubernetes._runner_tls import RunnerCertificate
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    GvisorIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    ResourceLimits,
)

SECRET = {
    "api-token": "tok-ENV-1234567890",
    "kube-conf": "conf-FILE-1234567890",
    "anthropic-api-key": "sk-SIDE-1",
}


def allow(destination: str, port: int | None = None) -> NetworkRule:
    return NetworkRule(destination=destination, port=port, action=NetworkAction.ALLOW)


def deny(destination: str) -> NetworkRule:
    return NetworkRule(destination=destination, action=NetworkAction.DENY)


TABLE: dict[str, EnvironmentSpec] = {
    "deny-all": EnvironmentSpec(),
    "domains-and-cidrs": EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[allow("api.github.com", 443), allow("10.20.0.0/16"), deny("10.20.5.0/24")],
        ),
        resources=ResourceLimits(cpu="500m", memory="1Gi", disk="2Gi"),
    ),
    "all-credential-kinds": EnvironmentSpec(
        network=NetworkPolicy(default=NetworkAction.DENY, rules=[allow("api.anthropic.com", 443)]),
        credentials=[
            CredentialRef(name="api-token", injection=CredentialInjection.env_var("API_TOKEN")),
            CredentialRef(name="kube-conf", injection=CredentialInjection.file("/workspace/.conf/token")),
            CredentialRef(name="anthropic-api-key", injection=CredentialInjection.sidecar()),
        ],
    ),
    "gvisor-and-gpu": EnvironmentSpec(
        isolation=[GvisorIsolation()], resources=ResourceLimits(cpu="2", gpu="1")
    ),
}


def docker_meaning(spec: EnvironmentSpec, plan: SandboxPlan, limits: Limits, state: Path) -> dict[str, Any]:
    """What the Docker backend renders, reduced to its effective policy."""
    boundary = resolve_boundary(spec, {"runc", "runsc", "nvidia"})
    credentials = ResolvedCredentials({c.name: SECRET[c.name] for c in plan.credentials})
    wiring = EgressWiring(
        client=None, sandbox_id="sb-1", state_dir=state, labels={},
        user=(65534, 65534), root=True, image="img", plan=plan, credentials=credentials,
        egress_networks=(), events=None,
    )  # fmt: skip
    wiring.network = SimpleNamespace(name="airlock-sb-1")
    wiring.write_files()  # the 0400 files bound into the sandbox, and the proxy's directory
    wiring.subnet = "172.30.0.0/24"
    config = container_config(
        image="img", sandbox_id="sb-1", control_dir="/state/sb-1", labels={}, boundary=boundary,
        limits=limits, runtimes={"runc", "runsc", "nvidia"}, extra=wiring.sandbox_settings(),
    )  # fmt: skip
    env = config["environment"]
    mounts = {bind["bind"] for bind in config["volumes"].values()}
    sandbox_side = json.dumps(config) + "".join(
        Path(source).read_text() for source, bind in config["volumes"].items() if Path(source).is_file()
    )
    proxy = wiring.needs_network
    proxy_plan = BundleConfig.model_validate_json(wiring.bundle_config_json()).plan if proxy else None
    return {
        "proxy": proxy,
        "egress": proxy_plan,
        "credentials": {
            c.name: ("env", c.var_name)
            if c.var_name in env
            else ("file", c.path)
            if c.path in mounts
            else ("proxy", None)
            for c in plan.credentials
        },
        "secret values the sandbox can read": sorted(v for v in SECRET.values() if v in sandbox_side),
        "hardening": (config["user"], config["read_only"], config["cap_drop"], config["security_opt"]),
        "cpu_millis": config["nano_cpus"] // 10**6,
        "memory": config["mem_limit"],
        "workspace": int(config["tmpfs"]["/workspace"].split("size=")[1].split("k")[0]) * 1024,
        "tmp": int(config["tmpfs"]["/tmp"].split("size=")[1].split("k")[0]) * 1024,
        "gpus": config.get("device_requests", [{}])[0].get("count"),
        "isolation": {"runc": "container", "runsc": "gvisor"}[config["runtime"]],
    }


def kubernetes_meaning(spec: EnvironmentSpec, plan: SandboxPlan, limits: Limits) -> dict[str, Any]:
    """What the Kubernetes backend renders, reduced to the same effective policy."""
    settings = KubernetesSettings()
    kind = requested_isolation(spec, "kubernetes").kind
    shape = SandboxShape(
        sandbox_id="sb-1", namespace="ns", owner=Owner("airlock-owner-1", "uid-1"), settings=settings,
        image="img", plan=plan, limits=limits,
        runtime_class=None if kind == "container" else settings.runtime_classes.gvisor,
        active_deadline_s=None, controller_namespace="airlock",
    )  # fmt: skip
    credentials = ResolvedCredentials({c.name: SECRET[c.name] for c in plan.credentials})
    proxy = needs_proxy(plan)
    pod = render_pod(shape, proxy_ip="10.244.0.9" if proxy else None)
    runner = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
    env = {e["name"] for e in runner.get("env", [])}
    mounts = {m["mountPath"] for m in runner.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    sandbox_secret = render_secret(shape, "token", credentials, RunnerCertificate(b"cert", b"key"))
    sandbox_side = json.dumps(pod) + "".join(
        base64.b64decode(v).decode() for v in sandbox_secret.get("data", {}).values()
    )
    limits_of = runner["resources"]["limits"]
    security = runner["securityContext"]
    if proxy:
        proxy_secret = render_proxy_secret(shape, credentials)
        proxy_config = BundleConfig.model_validate_json(base64.b64decode(proxy_secret["data"]["config.json"]))
        assert proxy_config == bundle_config(shape)
    return {
        "proxy": proxy,
        "egress": bundle_config(shape).plan if proxy else None,
        "credentials": {
            c.name: ("env", c.var_name)
            if c.var_name in env
            else ("file", c.path)
            if c.path in mounts
            else ("proxy", None)
            for c in plan.credentials
        },
        "secret values the sandbox can read": sorted(v for v in SECRET.values() if v in sandbox_side),
        "hardening": (
            f"{security['runAsUser']}:{security['runAsGroup']}",
            security["readOnlyRootFilesystem"],
            security["capabilities"]["drop"],
            ["no-new-privileges:true"] if security["allowPrivilegeEscalation"] is False else [],
        ),
        "cpu_millis": int(limits_of["cpu"].removesuffix("m")),
        "memory": int(limits_of["memory"]),
        "workspace": _quantity(volumes["workspace"]["emptyDir"]["sizeLimit"]),
        "tmp": _quantity(volumes["tmp"]["emptyDir"]["sizeLimit"]),
        "gpus": int(limits_of["nvidia.com/gpu"]) if "nvidia.com/gpu" in limits_of else None,
        "isolation": "gvisor" if pod["spec"].get("runtimeClassName") == "gvisor" else "container",
    }


def _quantity(value: Any) -> int:
    from airlock.policy.resources import parse_bytes

    return parse_bytes(str(value))


@pytest.mark.parametrize("name", TABLE)
def test_the_same_spec_means_the_same_on_both_backends(name: str, tmp_path: Path) -> None:
    spec = TABLE[name]
    plan = compile_plan(spec)
    limits = resolve_limits(spec)
    on_docker = docker_meaning(spec, plan, limits, tmp_path)
    on_kubernetes = kubernetes_meaning(spec, plan, limits)
    assert on_docker == on_kubernetes
    # and the table is not vacuous: the sidecar's value never reaches the sandbox on either
    assert SECRET["anthropic-api-key"] not in on_docker["secret values the sandbox can read"]
    if name == "all-credential-kinds":
        assert on_docker["credentials"] == {
            "api-token": ("env", "API_TOKEN"),
            "kube-conf": ("file", "/workspace/.conf/token"),
            "anthropic-api-key": ("proxy", None),
        }
    if name == "deny-all":
        assert on_docker["proxy"] is False and on_docker["egress"] is None

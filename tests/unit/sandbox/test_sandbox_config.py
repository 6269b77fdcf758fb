"""The pure EnvironmentSpec → container settings functions: every hardening flag, every refusal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from airlock.sandbox import SandboxDefaults, compile_sandbox_plan, resolve_limits
from airlock.sandbox.docker import DockerRuntimes, daemon_json
from airlock.sandbox.docker._config import (
    GVISOR_HOST_PIDS_BASE,
    GVISOR_HOST_PIDS_PER_PROCESS,
    Boundary,
    container_config,
    resolve_boundary,
    runner_command,
)
from layer0 import (
    ContainerIsolation,
    CredentialInjection,
    CredentialRef,
    CustomIsolation,
    EnvError,
    EnvironmentSpec,
    GvisorIsolation,
    MicroVmIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkPolicyIsolation,
    NetworkRule,
    ProcessIsolation,
    ResourceLimits,
    WasmIsolation,
)

RUNC = {"runc", "io.containerd.runc.v2"}


def build(spec: EnvironmentSpec, runtimes: set[str] = RUNC, **kw: Any) -> dict[str, Any]:
    return container_config(
        image="airlock-runner:test",
        sandbox_id="sb-0123456789ab",
        control_dir="/run/airlock/sb-0123456789ab",
        labels={"airlock.sandbox": "sb-0123456789ab"},
        boundary=resolve_boundary(spec, runtimes),
        limits=resolve_limits(spec),
        runtimes=runtimes,
        **kw,
    )


def test_default_container_is_hardened() -> None:
    c = build(EnvironmentSpec())
    assert c["user"] == "65534:65534"
    assert c["read_only"] is True
    assert c["privileged"] is False
    assert c["cap_drop"] == ["ALL"]
    assert "cap_add" not in c
    assert c["security_opt"] == ["no-new-privileges:true"]
    assert not any("seccomp" in o or "apparmor" in o for o in c["security_opt"])  # engine defaults stay on
    assert c["network_mode"] == "none"
    assert c["init"] is True
    assert c["runtime"] == "runc"
    assert c["pids_limit"] == 256
    assert c["mem_limit"] == 512 * 2**20
    assert c["memswap_limit"] == c["mem_limit"]  # no swap beyond the limit
    assert c["nano_cpus"] == 1_000_000_000
    assert c["ipc_mode"] == "private"
    # The only host path: the control dir, at /run/airlock; never the Docker socket.
    assert c["volumes"] == {"/run/airlock/sb-0123456789ab": {"bind": "/run/airlock", "mode": "rw"}}
    assert "mounts" not in c and "devices" not in c and "device_requests" not in c
    assert all("docker.sock" not in k for k in c["volumes"])
    assert c["tmpfs"]["/workspace"].startswith("rw,nosuid,nodev,exec,size=262144k,")
    assert "uid=65534,gid=65534" in c["tmpfs"]["/workspace"]
    assert "noexec" in c["tmpfs"]["/tmp"] and "size=65536k" in c["tmpfs"]["/tmp"]
    assert c["labels"] == {"airlock.sandbox": "sb-0123456789ab"}
    assert c["command"] == runner_command()
    assert "--token-file-delete" in c["command"]
    assert "unix:/run/airlock/runner.sock" in c["command"]
    assert not any("token" in str(v).lower() for v in c["environment"].values())


def test_limits_from_spec() -> None:
    spec = EnvironmentSpec(resources=ResourceLimits(cpu="500m", memory="1Gi", disk="2Gi"))
    c = build(spec)
    assert c["nano_cpus"] == 500_000_000
    assert c["mem_limit"] == c["memswap_limit"] == 2**30
    assert "size=2097152k" in c["tmpfs"]["/workspace"]


def test_custom_defaults_and_user() -> None:
    spec = EnvironmentSpec()
    c = container_config(
        image="i",
        sandbox_id="sb-x",
        control_dir="/d",
        labels={},
        boundary=resolve_boundary(spec, RUNC),
        limits=resolve_limits(spec, SandboxDefaults(cpu="2", memory="256Mi", pids=64)),
        runtimes=RUNC,
        user=(1000, 1000),
    )
    assert c["user"] == "1000:1000" and c["pids_limit"] == 64 and c["nano_cpus"] == 2 * 10**9
    assert "uid=1000,gid=1000" in c["tmpfs"]["/workspace"]


def test_bad_resource_strings_are_env_errors() -> None:
    with pytest.raises(EnvError) as e:
        resolve_limits(EnvironmentSpec(resources=ResourceLimits(memory="lots")))
    assert e.value.kind == "resource_exceeded" and "memory 'lots'" in str(e.value)
    with pytest.raises(EnvError, match="cpu '2 cores'"):
        resolve_limits(EnvironmentSpec(resources=ResourceLimits(cpu="2 cores")))


def test_gpu_needs_a_gpu_runtime() -> None:
    spec = EnvironmentSpec(resources=ResourceLimits(gpu="1"))
    with pytest.raises(EnvError) as e:
        build(spec)
    assert e.value.kind == "resource_exceeded" and "nvidia" in str(e.value)
    c = build(spec, RUNC | {"nvidia"})
    assert c["device_requests"] == [{"count": 1, "capabilities": [["gpu"]]}]


GVISOR = RUNC | {"runsc", "runsc-hostnet"}


def test_gvisor_and_kata_runtimes() -> None:
    assert resolve_boundary(EnvironmentSpec(isolation=[GvisorIsolation()]), GVISOR) == Boundary(
        "gvisor", "runsc", init=False
    )
    kata = resolve_boundary(EnvironmentSpec(isolation=[MicroVmIsolation()]), RUNC | {"io.containerd.kata.v2"})
    assert kata.runtime == "io.containerd.kata.v2" and kata.init
    spec = EnvironmentSpec(isolation=[ContainerIsolation(image="mine:1"), GvisorIsolation()])
    assert resolve_boundary(spec, {"runsc"}) == Boundary("gvisor", "runsc", "mine:1", init=False)
    config = build(EnvironmentSpec(isolation=[GvisorIsolation()]), GVISOR)
    assert config["runtime"] == "runsc"
    assert config["init"] is False  # the runner is PID 1: gVisor grants the subreaper role only to init


def test_a_networked_gvisor_sandbox_uses_its_own_registration() -> None:
    spec = EnvironmentSpec(isolation=[GvisorIsolation()])
    assert resolve_boundary(spec, GVISOR, networked=True).runtime == "runsc-hostnet"
    with pytest.raises(EnvError) as e:
        resolve_boundary(spec, RUNC | {"runsc"}, networked=True)
    assert e.value.kind == "isolation_violation"
    assert "'runsc-hostnet'" in str(e.value) and "--network=host" in str(e.value)


def test_runtime_names_are_configurable() -> None:
    names = DockerRuntimes(gvisor="gv", gvisor_networked="gv-net", micro_vm=("my-kata",))
    spec = EnvironmentSpec(isolation=[GvisorIsolation()])
    assert resolve_boundary(spec, {"gv", "gv-net"}, names).runtime == "gv"
    assert resolve_boundary(spec, {"gv", "gv-net"}, names, networked=True).runtime == "gv-net"
    vm = EnvironmentSpec(isolation=[MicroVmIsolation()])
    assert resolve_boundary(vm, {"my-kata", "kata"}, names).runtime == "my-kata"
    with pytest.raises(EnvError, match="'gv'"):
        resolve_boundary(spec, GVISOR, names)
    with pytest.raises(ValidationError):
        DockerRuntimes(gvisor=" ")
    with pytest.raises(ValidationError):
        DockerRuntimes(micro_vm=())


def test_the_gvisor_floor_upgrades_containers_and_never_downgrades() -> None:
    plain = resolve_boundary(EnvironmentSpec(), GVISOR, floor="gvisor")
    assert (plain.kind, plain.runtime) == ("gvisor", "runsc")
    image = resolve_boundary(
        EnvironmentSpec(isolation=[ContainerIsolation(image="mine:1")]), GVISOR, floor="gvisor"
    )
    assert (image.kind, image.image) == ("gvisor", "mine:1")
    vm = resolve_boundary(EnvironmentSpec(isolation=[MicroVmIsolation()]), GVISOR | {"kata"}, floor="gvisor")
    assert vm.kind == "micro_vm"
    with pytest.raises(EnvError) as e:
        resolve_boundary(EnvironmentSpec(), RUNC, floor="gvisor")
    assert e.value.kind == "isolation_violation"


def test_gvisor_caps_processes_inside_its_own_kernel() -> None:
    config = build(EnvironmentSpec(isolation=[GvisorIsolation()]), GVISOR)
    assert config["ulimits"] == [{"Name": "nproc", "Soft": 256, "Hard": 256}]
    assert config["pids_limit"] == GVISOR_HOST_PIDS_BASE + GVISOR_HOST_PIDS_PER_PROCESS * 256
    runc = build(EnvironmentSpec())
    assert runc["pids_limit"] == 256 and "ulimits" not in runc  # RLIMIT_NPROC is host-wide per uid there


def test_daemon_json_registers_both_gvisor_runtimes() -> None:
    entry = daemon_json(DockerRuntimes(gvisor="gv", gvisor_networked="gv-net"))["runtimes"]
    assert entry["gv"]["runtimeArgs"] == ["--network=none", "--host-uds=create"]
    assert entry["gv-net"]["runtimeArgs"] == ["--network=host", "--host-uds=create"]
    assert {e["path"] for e in entry.values()} == {"/usr/bin/runsc"}


@pytest.mark.parametrize(
    ("boundary", "named"),
    [(GvisorIsolation(), "'runsc'"), (MicroVmIsolation(), "Kata")],
)
def test_missing_runtime_never_falls_back(boundary: Any, named: str) -> None:
    with pytest.raises(EnvError) as e:
        resolve_boundary(EnvironmentSpec(isolation=[boundary]), RUNC)
    assert e.value.kind == "isolation_violation"
    assert named in str(e.value) and "never falls back" in str(e.value)


@pytest.mark.parametrize(
    ("isolation", "needle"),
    [
        ([ProcessIsolation()], "the process backend"),
        ([WasmIsolation()], "wasm"),
        ([CustomIsolation(boundary_type="sgx", config={})], "sgx"),
        ([GvisorIsolation(), MicroVmIsolation()], "one runtime"),
    ],
)
def test_unprovidable_isolation(isolation: list[Any], needle: str) -> None:
    with pytest.raises(EnvError) as e:
        resolve_boundary(EnvironmentSpec(isolation=isolation), RUNC | {"runsc", "kata"})
    assert e.value.kind == "isolation_violation" and needle in str(e.value)


def test_process_inside_container_is_fine() -> None:
    spec = EnvironmentSpec(isolation=[ContainerIsolation(), ProcessIsolation()])
    assert resolve_boundary(spec, RUNC).runtime == "runc"


def test_check_spec_compiles_the_policy() -> None:
    assert not compile_sandbox_plan(EnvironmentSpec()).needs_egress_proxy
    deny_only = NetworkPolicy(
        default=NetworkAction.DENY, rules=[NetworkRule(destination="evil.example", action=NetworkAction.DENY)]
    )
    assert not compile_sandbox_plan(EnvironmentSpec(network=deny_only)).needs_egress_proxy
    allowed = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination="api.example.com", port=443, action=NetworkAction.ALLOW)],
        ),
        credentials=[CredentialRef(name="gh", injection=CredentialInjection.env_var("GH_TOKEN"))],
    )
    plan = compile_sandbox_plan(allowed)
    assert plan.needs_egress_proxy and [c.var_name for c in plan.credentials] == ["GH_TOKEN"]


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (  # a wildcard straddling private ranges
            EnvironmentSpec(
                isolation=[
                    NetworkPolicyIsolation(
                        rules=[NetworkRule(destination="8.0.0.0/6", action=NetworkAction.ALLOW)]
                    )
                ]
            ),
            "8.0.0.0/6",
        ),
        (  # allow-all egress with a credential
            EnvironmentSpec(
                network=NetworkPolicy(default=NetworkAction.ALLOW, rules=[]),
                credentials=[CredentialRef(name="gh", injection=CredentialInjection.env_var("GH_TOKEN"))],
            ),
            "allow",
        ),
        (  # a sidecar credential with no known route
            EnvironmentSpec(credentials=[CredentialRef(name="gh", injection=CredentialInjection.sidecar())]),
            "gh",
        ),
    ],
)
def test_unsafe_or_incomplete_policy_is_isolation_violation(spec: EnvironmentSpec, needle: str) -> None:
    with pytest.raises(EnvError) as e:
        compile_sandbox_plan(spec)
    assert e.value.kind == "isolation_violation" and needle in str(e.value)


def test_extra_settings_never_weaken_the_hardening() -> None:
    extra = {
        "environment": {"HTTP_PROXY": "http://airlock-proxy:3128", "API_TOKEN": "t"},
        "volumes": {"/state/sb-1.files/0": {"bind": "/run/secrets/k", "mode": "ro"}},
        "network": "airlock-sb-1",
        "dns": ["127.0.0.1"],
        "dns_opt": ["timeout:1", "attempts:1"],
    }
    plain, wired = build(EnvironmentSpec()), build(EnvironmentSpec(), extra=extra)
    assert plain["network_mode"] == "none" and "network" not in plain
    assert "network_mode" not in wired and wired["network"] == "airlock-sb-1"
    assert wired["dns"] == ["127.0.0.1"] and wired["dns_opt"] == ["timeout:1", "attempts:1"]
    assert wired["environment"]["HTTP_PROXY"] == "http://airlock-proxy:3128"
    assert wired["volumes"]["/state/sb-1.files/0"] == {"bind": "/run/secrets/k", "mode": "ro"}
    for key in ("read_only", "privileged", "cap_drop", "security_opt", "pids_limit", "user", "init"):
        assert wired[key] == plain[key]


def test_the_setup_script_registers_what_the_backend_expects() -> None:
    script = (Path(__file__).parents[3] / "scripts" / "gvisor-setup.sh").read_text()
    line = next(x for x in script.splitlines() if x.startswith("RUNTIMES="))
    assert json.loads(line.split("=", 1)[1].strip("'")) == daemon_json()["runtimes"]

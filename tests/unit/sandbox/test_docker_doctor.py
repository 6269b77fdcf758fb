"""``airlock doctor``'s runtime checks for the Docker backend, against a scripted engine:
both gVisor registrations with their arguments, a real start, and micro_vm's reason."""

from __future__ import annotations

from typing import Any

from airlock.sandbox.docker import DockerRuntimes, DockerSettings
from airlock.sandbox.docker._doctor import _check_runtimes, _kvm_note, _pid_max_check

GOOD = {
    "runc": {"path": "runc"},
    "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=create"]},
    "runsc-hostnet": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host", "--host-uds=create"]},
}


class Containers:
    def __init__(self, release: bytes = b"4.4.0\n") -> None:
        self.release = release
        self.runs: list[dict[str, Any]] = []

    def run(self, image: str, **kw: Any) -> bytes:
        self.runs.append(kw)
        return self.release


class Engine:
    def __init__(self, runtimes: dict[str, Any]) -> None:
        self.runtimes = runtimes
        self.containers = Containers()

    def info(self) -> dict[str, Any]:
        return {"Runtimes": self.runtimes}


def checks(runtimes: dict[str, Any], settings: DockerSettings | None = None) -> dict[str, Any]:
    engine = Engine(runtimes)
    found = {c.name: c for c in _check_runtimes(engine, settings or DockerSettings())}
    found["_runs"] = engine.containers.runs
    return found


def test_both_registrations_and_a_real_start() -> None:
    found = checks(GOOD)
    assert found["gvisor"].status == found["gvisor-networked"].status == "ok"
    assert "--network=host --host-uds=create" in found["gvisor-networked"].message
    assert found["gvisor-start"].status == "ok" and "4.4.0" in found["gvisor-start"].message
    (run,) = found["_runs"]
    assert run["runtime"] == "runsc" and run["network_mode"] == "none" and run["cap_drop"] == ["ALL"]


def test_absent_is_a_warning_with_the_daemon_json_entry() -> None:
    found = checks({"runc": {}})
    for name in ("gvisor", "gvisor-networked"):
        assert found[name].status == "warning" and "not registered" in found[name].message
        assert '"runsc-hostnet": {"path": "/usr/bin/runsc"' in (found[name].hint or "")
    assert "gvisor-start" not in found and found["_runs"] == []


def test_a_registration_without_its_arguments_is_an_error() -> None:
    runtimes = {**GOOD, "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": []}}
    found = checks(runtimes)
    assert found["gvisor"].status == "error"
    assert "--network=none --host-uds=create" in found["gvisor"].message


def test_configured_names_are_the_ones_checked() -> None:
    settings = DockerSettings(
        runtimes=DockerRuntimes(gvisor="gv", gvisor_networked="gv-net", micro_vm=("vm",))
    )
    found = checks({"gv": GOOD["runsc"], "gv-net": GOOD["runsc-hostnet"], "vm": {}}, settings)
    assert found["gvisor"].status == "ok" and "'gv'" in found["gvisor"].message
    assert found["micro_vm"].status == "ok" and "vm" in found["micro_vm"].message
    assert found["_runs"][0]["runtime"] == "gv"


def test_micro_vm_absent_says_what_to_use_instead() -> None:
    found = checks(GOOD)
    assert found["micro_vm"].status == "warning"
    assert "Kata" in found["micro_vm"].message and "gvisor" in (found["micro_vm"].hint or "")


def test_the_kvm_note_names_a_paravirtual_kvm(tmp_path: Any) -> None:
    cpuinfo, kvm = tmp_path / "cpuinfo", tmp_path / "kvm"
    cpuinfo.write_text("flags : fpu sse2 hypervisor\n")
    assert "no /dev/kvm" in _kvm_note(str(cpuinfo), str(kvm))
    kvm.touch()
    assert "no vmx/svm" in _kvm_note(str(cpuinfo), str(kvm))
    cpuinfo.write_text("flags : fpu vmx\n")
    assert _kvm_note(str(cpuinfo), str(kvm)) == ""


def test_a_small_host_pid_space_is_a_warning_for_gvisor(tmp_path: Any) -> None:
    pid_max = tmp_path / "pid_max"
    pid_max.write_text("32768\n")
    small = _pid_max_check(str(pid_max))
    assert small is not None and small.status == "warning" and "kernel.pid_max" in (small.hint or "")
    pid_max.write_text("4194304\n")
    large = _pid_max_check(str(pid_max))
    assert large is not None and large.status == "ok"
    assert _pid_max_check(str(tmp_path / "absent")) is None

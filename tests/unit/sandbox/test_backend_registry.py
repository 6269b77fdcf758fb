"""The backend registry: every backend declares what config validation and doctor ask of it."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from airlock.config import InvalidConfigError, load_config
from airlock.sandbox import Backend, Sandbox, backend, backend_names, backends
from layer0 import EnvError, EnvironmentSpec


def test_the_registered_backends() -> None:
    assert backend_names() == ("docker", "kubernetes", "process")
    assert all(isinstance(b, Backend) for b in backends())


@pytest.mark.parametrize("b", backends(), ids=lambda b: b.name)
def test_each_backend_declares_what_config_and_doctor_ask(b: Backend) -> None:
    assert b.name and b.summary
    # config: which isolation it provides, what it gives an agent that names none
    assert b.isolations, "a backend provides at least one isolation boundary"
    assert b.default_isolation and {i.type for i in b.default_isolation} <= b.isolations
    assert EnvironmentSpec(isolation=list(b.default_isolation)).isolation  # valid layer0 boundaries
    caps = b.capabilities
    assert isinstance(caps.network_policy, bool)
    assert isinstance(caps.resource_limits, bool)
    assert isinstance(caps.credentials, bool)
    assert caps.model_endpoint in ("egress_proxy", "loopback")
    # doctor: an async check list; the run path: a factory; gc: an optional async reaper
    assert inspect.iscoroutinefunction(b.doctor)
    assert callable(b.factory)
    assert b.reap is None or inspect.iscoroutinefunction(b.reap)


@pytest.mark.parametrize("b", backends(), ids=lambda b: b.name)
def test_each_backend_builds_a_sandbox_without_touching_its_engine(b: Backend) -> None:
    sandbox = b.create()
    assert isinstance(sandbox, Sandbox)


def test_the_process_backend_reaches_host_services_on_loopback() -> None:
    sandbox = backend("process").create()
    assert asyncio.run(sandbox.host_address()) == "127.0.0.1"


def test_the_process_doctor_check_is_ok() -> None:
    checks = asyncio.run(backend("process").doctor())
    assert [(c.name, c.status) for c in checks] == [("process", "ok")]


def test_an_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(EnvError) as info:
        backend("firecracker")
    assert "unknown sandbox backend 'firecracker'; backends: docker, kubernetes, process" in str(info.value)


@pytest.mark.parametrize("b", backends(), ids=lambda b: b.name)
def test_config_follows_what_each_backend_declares(b: Backend, tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(f"agents:\n  a: {{provider: {{kind: scripted, script: []}}, backend: {b.name}}}\n")
    agent = load_config(path).agent("a")
    assert agent.environment.isolation == list(b.default_isolation)
    assert (agent.environment.network is not None) == b.capabilities.network_policy
    path.write_text(
        "agents:\n  a:\n    provider: {kind: scripted, script: []}\n"
        f"    backend: {b.name}\n    resources: {{memory: 256Mi}}\n"
    )
    if b.capabilities.resource_limits:
        assert load_config(path).agent("a").environment.resources is not None
    else:
        with pytest.raises(InvalidConfigError, match="cannot enforce `resources`"):
            load_config(path)

"""The runtime venv: wheel cache, offline install, readiness marker (real pip and venv).

A tiny local package stands in for llama-cpp-python (whose build takes minutes); the
mechanics are the same: ``pip wheel`` into the cache, a fresh venv, an offline install.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from airlock.localmodel import (
    CachePaths,
    ProgressEvent,
    RuntimeSetupError,
    RuntimeSpec,
    cached_wheel,
    ensure_runtime,
    runtime_ready,
)

from .localmodel_fakes import build_wheel


@pytest.fixture
def spec(tmp_path: Path) -> RuntimeSpec:
    index = tmp_path / "index"
    index.mkdir()
    build_wheel(index, "airlockfake_runtime", "0.1.0", {"airlockfake_runtime/__init__.py": b"VALUE = 42\n"})
    return RuntimeSpec(
        package="airlockfake-runtime",
        version="0.1.0",
        pip_args=("--no-index", "--find-links", str(index)),
        check_modules=("airlockfake_runtime",),
    )


async def test_build_cache_install_and_reuse(cache: CachePaths, spec: RuntimeSpec) -> None:
    assert not runtime_ready(cache, spec) and cached_wheel(cache, spec) is None
    events: list[ProgressEvent] = []
    python = await ensure_runtime(cache, spec, progress=events.append)
    assert python == cache.venv_python and python.exists()
    assert runtime_ready(cache, spec)
    wheel = cached_wheel(cache, spec)
    assert wheel is not None and wheel.parent == cache.wheels_dir
    phases = [e.phase for e in events]
    assert phases.index("create_venv") < phases.index("build_wheel") < phases.index("install")
    # Ready: the second call does nothing.
    events.clear()
    assert await ensure_runtime(cache, spec, progress=events.append) == python
    assert [e.phase for e in events] == ["done"]


async def test_reinstall_uses_the_cached_wheel(cache: CachePaths, spec: RuntimeSpec, tmp_path: Path) -> None:
    await ensure_runtime(cache, spec)
    for whl in (tmp_path / "index").iterdir():
        whl.unlink()  # building again would now fail; installing from the cache must not
    (cache.venv_dir / "airlock-runtime.json").unlink()
    events: list[ProgressEvent] = []
    await ensure_runtime(cache, spec, progress=events.append)
    assert "build_wheel" not in [e.phase for e in events]
    assert runtime_ready(cache, spec)


async def test_unavailable_package_is_a_clear_error(cache: CachePaths, spec: RuntimeSpec) -> None:
    missing = dataclasses.replace(spec, version="9.9.9")
    with pytest.raises(RuntimeSetupError, match=r"building the airlockfake-runtime==9\.9\.9 wheel failed"):
        await ensure_runtime(cache, missing)
    assert not runtime_ready(cache, missing)


async def test_import_check_failure_is_reported(cache: CachePaths, spec: RuntimeSpec) -> None:
    broken = dataclasses.replace(spec, check_modules=("airlockfake_runtime", "no_such_module_xyz"))
    with pytest.raises(RuntimeSetupError, match="does not import") as info:
        await ensure_runtime(cache, broken)
    assert "no_such_module_xyz" in str(info.value)
    assert not runtime_ready(cache, broken)

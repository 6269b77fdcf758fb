"""The model server's runtime: a dedicated venv with llama-cpp-python from a cached wheel.

llama-cpp-python ships only as an sdist, so its wheel is compiled once (minutes) into
``<cache>/wheels`` together with its dependencies' wheels, and installed from there (seconds,
no network) into ``<cache>/localmodel/venv``. airlock itself is never installed in that venv.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from airlock.subprocesses import run_command

from ._errors import RuntimeSetupError
from ._fetch import file_lock
from ._paths import CachePaths
from ._progress import ProgressCallback, ProgressEvent, _Reporter

LLAMA_CPP_VERSION = "0.3.36"

# A portable CPU build: GGML_NATIVE=OFF targets AVX2/FMA/F16C instead of this machine's exact
# CPU, so the cached wheel also runs on other x86-64 hosts; no GPU backends, no extra tools.
CPU_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF "
    "-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "
    "-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF"
)

_NINJA_STEP = re.compile(r"\[(\d+)/(\d+)\]")
_MARKER = "airlock-runtime.json"


@dataclass(frozen=True)
class RuntimeSpec:
    """What to install into the runtime venv."""

    package: str = "llama-cpp-python"
    version: str = LLAMA_CPP_VERSION
    cmake_args: str = CPU_CMAKE_ARGS
    build_env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the wheel build (e.g. ``CMAKE_BUILD_PARALLEL_LEVEL``)."""
    pip_args: tuple[str, ...] = ()
    """Extra pip options for build and install (e.g. a local mirror)."""
    check_modules: tuple[str, ...] = ("llama_cpp", "jinja2")
    """Modules that must import in the venv once installed."""

    @property
    def requirement(self) -> str:
        """The pip requirement string."""
        return f"{self.package}=={self.version}"

    @property
    def wheel_glob(self) -> str:
        """File-name pattern of the built wheel."""
        return f"{self.package.replace('-', '_')}-{self.version}-*.whl"


DEFAULT_RUNTIME = RuntimeSpec()


def cached_wheel(paths: CachePaths, spec: RuntimeSpec = DEFAULT_RUNTIME) -> Path | None:
    """The cached llama-cpp-python wheel, if built already."""
    if not paths.wheels_dir.is_dir():
        return None
    found = sorted(paths.wheels_dir.glob(spec.wheel_glob))
    return found[-1] if found else None


def runtime_ready(paths: CachePaths, spec: RuntimeSpec = DEFAULT_RUNTIME) -> bool:
    """Whether the venv exists and has the wanted llama-cpp-python installed (by marker)."""
    try:
        marker = json.loads((paths.venv_dir / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(
        paths.venv_python.exists()
        and isinstance(marker, dict)
        and marker.get("requirement") == spec.requirement
    )


async def build_wheel(
    paths: CachePaths,
    spec: RuntimeSpec = DEFAULT_RUNTIME,
    *,
    progress: ProgressCallback | None = None,
    python: str | None = None,
) -> Path:
    """Compile the llama-cpp-python wheel (and fetch its dependencies' wheels) into the cache.

    Progress counts the compile steps. Takes minutes on a small machine.

    Raises:
        RuntimeSetupError: the build failed (the message holds the last output lines).
    """
    report = _Reporter(progress)
    await asyncio.to_thread(paths.wheels_dir.mkdir, parents=True, exist_ok=True)
    env = {"CMAKE_ARGS": spec.cmake_args, "FORCE_CMAKE": "1", **spec.build_env}
    argv = [
        python or sys.executable, "-m", "pip", "wheel", "-v", "--disable-pip-version-check",
        "--no-input", "--progress-bar", "off", spec.requirement, "-w", str(paths.wheels_dir),
        *spec.pip_args,
    ]  # fmt: skip
    report(ProgressEvent("build_wheel", 0, None, "steps", f"building {spec.requirement}"))

    def on_line(line: str) -> None:
        m = _NINJA_STEP.search(line)
        if m and line.lstrip().startswith("["):
            report(ProgressEvent("build_wheel", int(m.group(1)), int(m.group(2)), "steps", "compiling"))

    try:
        result = await run_command(argv, merge_stderr=True, on_line=on_line, env={**os.environ, **env})
    except OSError as e:
        raise RuntimeSetupError(f"cannot run pip to build {spec.requirement}: {e}") from e
    wheel = await asyncio.to_thread(cached_wheel, paths, spec)
    if result.returncode != 0 or wheel is None:
        raise RuntimeSetupError(
            f"building the {spec.requirement} wheel failed (exit {result.returncode}); a C/C++ compiler "
            f"and cmake are required:\n{result.tail}"
        )
    return wheel


async def _pip_install(
    python: Path, paths: CachePaths, spec: RuntimeSpec, *, offline: bool
) -> tuple[int, str]:
    argv = [
        str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
        "--progress-bar", "off", "--find-links", str(paths.wheels_dir), "--only-binary", spec.package,
        *(["--no-index"] if offline else []), *spec.pip_args, spec.requirement,
    ]  # fmt: skip
    result = await run_command(argv, merge_stderr=True)
    return result.returncode, result.tail


async def ensure_runtime(
    paths: CachePaths,
    spec: RuntimeSpec = DEFAULT_RUNTIME,
    *,
    progress: ProgressCallback | None = None,
    rebuild: bool = False,
) -> Path:
    """Return the runtime venv's python, building the wheel and the venv when needed.

    The venv install first tries the cached wheels only (works offline), then the index for
    missing dependencies.

    Raises:
        RuntimeSetupError: the wheel build, venv creation or install failed.
    """
    report = _Reporter(progress)
    async with file_lock(paths.localmodel_dir / ".runtime.lock"):
        if not rebuild and await asyncio.to_thread(runtime_ready, paths, spec):
            report(ProgressEvent("done", 1, 1, "steps", str(paths.venv_python)))
            return paths.venv_python
        if rebuild and paths.venv_dir.exists():
            await asyncio.to_thread(shutil.rmtree, paths.venv_dir)
        if not paths.venv_python.exists():
            report(ProgressEvent("create_venv", 0, 1, "steps", str(paths.venv_dir)))
            try:
                created = await run_command(
                    [sys.executable, "-m", "venv", str(paths.venv_dir)], merge_stderr=True
                )
            except OSError as e:
                raise RuntimeSetupError(f"cannot create the runtime venv: {e}") from e
            if created.returncode != 0:
                raise RuntimeSetupError(f"creating the venv {paths.venv_dir} failed:\n{created.tail}")
            report(ProgressEvent("create_venv", 1, 1, "steps", str(paths.venv_dir)))
        wheel = None if rebuild else await asyncio.to_thread(cached_wheel, paths, spec)
        if wheel is None:
            # The venv's own pip builds the wheel: airlock's interpreter may have no pip.
            wheel = await build_wheel(paths, spec, progress=progress, python=str(paths.venv_python))
        report(ProgressEvent("install", 0, 1, "steps", wheel.name))
        rc, tail = await _pip_install(paths.venv_python, paths, spec, offline=True)
        if rc != 0:
            rc, tail = await _pip_install(paths.venv_python, paths, spec, offline=False)
        if rc != 0:
            raise RuntimeSetupError(f"installing {wheel.name} into {paths.venv_dir} failed:\n{tail}")
        probe = (
            "import importlib, importlib.metadata as md\n"
            f"for name in {list(spec.check_modules)!r}: importlib.import_module(name)\n"
            f"print(md.version({spec.package!r}))"
        )
        check = await run_command([str(paths.venv_python), "-c", probe], merge_stderr=True)
        if check.returncode != 0 or check.tail.strip().splitlines()[-1:] != [spec.version]:
            raise RuntimeSetupError(f"{spec.requirement} does not import in {paths.venv_dir}:\n{check.tail}")
        marker = {"requirement": spec.requirement, "wheel": wheel.name}
        await asyncio.to_thread((paths.venv_dir / _MARKER).write_text, json.dumps(marker), encoding="utf-8")
        report(ProgressEvent("install", 1, 1, "steps", wheel.name))
    report(ProgressEvent("done", 1, 1, "steps", str(paths.venv_python)))
    return paths.venv_python

"""airlock.controller: environments (local process, Docker), images, policy, orchestration.

Importing this package is cheap: the Docker SDK and the gRPC client are only imported when
a Docker or process environment is used. Submodules ``local``, ``orchestrator``,
``effects``, ``policy`` and ``secrets`` are imported directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._docker import DockerEnvironment
    from ._images import ImageBuildReport, build_runner_image, runner_image_tag
    from ._process import LocalProcessEnvironment
    from ._reaper import ReapReport, default_state_dir, reap_orphans
    from ._resources import parse_cpu, parse_memory

__all__ = [
    "DockerEnvironment",
    "ImageBuildReport",
    "LocalProcessEnvironment",
    "ReapReport",
    "build_runner_image",
    "default_state_dir",
    "parse_cpu",
    "parse_memory",
    "reap_orphans",
    "runner_image_tag",
]

_LAZY = {
    "DockerEnvironment": "._docker",
    "ImageBuildReport": "._images",
    "build_runner_image": "._images",
    "runner_image_tag": "._images",
    "LocalProcessEnvironment": "._process",
    "ReapReport": "._reaper",
    "default_state_dir": "._reaper",
    "reap_orphans": "._reaper",
    "parse_cpu": "._resources",
    "parse_memory": "._resources",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'airlock.controller' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value

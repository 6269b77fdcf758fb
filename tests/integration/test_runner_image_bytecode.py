"""The runner image carries valid bytecode for everything the runner imports: a sandbox (read-only
root, ``PYTHONDONTWRITEBYTECODE``) never compiles a module at start."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airlock.images._bytecode import check_argv

pytestmark = pytest.mark.docker

PYTHON = "/opt/venv/bin/python"
#: What ``python -m airlock.runner`` imports before it serves, then what a turn needs.
IMPORTS = (
    "import airlock.runner.__main__; from airlock.tools import adopt_orphans; "
    "airlock.runner.__main__.preload()"
)


def run(client: Any, image: str, argv: list[str], **options: Any) -> str:
    out = client.containers.run(
        image, argv[1:], entrypoint=argv[:1], network_mode="none", remove=True, stderr=True, **options
    )
    return bytes(out).decode(errors="replace")


def test_every_module_the_runner_loads_comes_from_unchecked_hash_bytecode(
    docker_client: Any, runner_image: str
) -> None:
    sandbox = {"read_only": True, "user": "65534:65534"}
    run(docker_client, runner_image, check_argv("airlock.runner.__main__", PYTHON), **sandbox)
    trace = run(docker_client, runner_image, [PYTHON, "-v", "-c", IMPORTS], **sandbox)
    from_bytecode = re.findall(r"^# code object from '?(\S+?\.pyc)'?$", trace, re.M)
    compiled = re.findall(r"^# code object from '?(\S+?\.py)'?$", trace, re.M)
    assert len(from_bytecode) > 100 and compiled == []


def test_importing_the_runner_writes_no_bytecode_even_where_it_could(
    docker_client: Any, runner_image: str
) -> None:
    # As root, on a writable root fs and without PYTHONDONTWRITEBYTECODE: a stale or missing
    # pyc would be (re)written, and show in the container's changes.
    container = docker_client.containers.create(
        runner_image,
        ["-c", IMPORTS],
        entrypoint=[PYTHON],
        user="0:0",
        environment={"PYTHONDONTWRITEBYTECODE": ""},
        network_mode="none",
    )
    try:
        container.start()
        assert container.wait(timeout=60)["StatusCode"] == 0, container.logs().decode()
        changed = [c["Path"] for c in container.diff() or [] if c["Path"].startswith(("/opt", "/usr"))]
    finally:
        container.remove(force=True)
    assert changed == []

"""A backend that cannot place its sandboxes refuses a request carrying a placement (the
configuration refuses such an agent already; a direct caller gets the same answer), before it
starts anything."""

from __future__ import annotations

import pytest

from airlock.sandbox import Placement, SandboxRequest
from airlock.sandbox.docker import DockerBackend
from airlock.sandbox.process import ProcessBackend
from airlock.testing import bash_agent
from layer0 import EnvError, EnvironmentSpec, TurnInput

GPU = Placement(node_selector={"airlock.dev/pool": "gpu"})


@pytest.mark.parametrize(("sandbox", "name"), [(ProcessBackend, "process"), (DockerBackend, "docker")])
async def test_a_placed_request_is_refused(sandbox: type[ProcessBackend | DockerBackend], name: str) -> None:
    request = SandboxRequest.compile(
        bash_agent("true"), TurnInput.new("go"), EnvironmentSpec(), placement=GPU
    )
    with pytest.raises(EnvError, match=f"the {name} backend cannot place a sandbox") as info:
        await sandbox().run(request)
    assert info.value.kind == "isolation_violation"

"""Agent extensions end to end on the real engine: the test package (tests/support/ext_package,
one provider, hook, context strategy, tool middleware and turn by entry point) built into a
wheel, then into a sandbox image; its custom turn and custom provider run in a real sandbox of
that image, handed over from the host by spec only; the image check loads the extensions an
agent names and reports the ones the image does not register."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.build import image_turn
from airlock.cli import app
from airlock.images import RUNNER, build_image, check_custom_tools
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from airlock.spec import AgentSpec
from layer0 import ContainerIsolation, EnvError, EnvironmentSpec, ExitReason, TurnInput
from tests.support.containers import assert_none_left
from tests.support.extensions import PACKAGE

pytestmark = pytest.mark.docker

#: Builds a wheel with what this venv holds: no index, no isolated build environment.
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps", "--no-build-isolation")
#: A runner image tag to build this checkout into instead of the shared one (a worktree's own).
BASE_ENV = "AIRLOCK_TEST_RUNNER_TAG"


@pytest.fixture(scope="module")
def base_image(request: pytest.FixtureRequest) -> str:
    """The runner image the extension image is built on: the session's, or this checkout's
    under ``$AIRLOCK_TEST_RUNNER_TAG``."""
    tag = os.environ.get(BASE_ENV)
    if not tag:
        return str(request.getfixturevalue("runner_image"))
    return asyncio.run(build_image(RUNNER, tag=tag)).tag


@pytest.fixture(scope="module")
def ext_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test package as a wheel, built offline from a copy (the build writes beside it)."""
    import shutil

    work = tmp_path_factory.mktemp("ext")
    shutil.copytree(
        PACKAGE, work / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    subprocess.run(
        [*PIP_WHEEL, "-w", str(work / "dist"), str(work / "src")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    [wheel] = (work / "dist").glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def ext_image(base_image: str, ext_wheel: Path, docker_client: Any) -> Iterator[str]:
    """The runner image plus the test package, built offline."""
    import docker.errors

    name = f"airlock-test-ext:{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        result = CliRunner().invoke(
            app,
            [
                "images",
                "build",
                "--name",
                name,
                "--base",
                base_image,
                "--wheel",
                str(ext_wheel),
                "--no-index",
            ],
        )
        assert result.exit_code == 0, result.output
        yield name
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(name, force=True)


@pytest.fixture
def ext_env(
    base_image: str, state_dir: Path, docker_client: Any, docker_settings: DockerSettings
) -> Iterator[DockerEnvironment]:
    yield DockerEnvironment(image=base_image, state_dir=state_dir, sweep=False, settings=docker_settings)
    assert_none_left(docker_client)


def spec(turn: str = "one-shot") -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": "ext",
            "provider": {"kind": "custom", "name": "echo-llm", "options": {"prefix": "heard "}},
            "tools": ["calculator"],
            "hooks": [{"custom": "audit"}],
            "context": {"strategy": "custom", "name": "keep-all"},
            "middleware": [{"name": "tagger", "options": {"tag": "mw"}}],
            "turn": {"entry_point": turn, "options": {"input": {"expression": "20+22"}}},
        }
    )


async def test_a_custom_turn_and_provider_run_in_a_sandbox_of_the_image(
    ext_env: DockerEnvironment, ext_image: str
) -> None:
    environment = EnvironmentSpec(isolation=[ContainerIsolation(image=ext_image)])
    output = await ext_env.run(image_turn(spec()), TurnInput.new("hello"), environment)
    assert output.exit_reason == ExitReason.complete()
    assert output.message.as_text() == "heard hello | [mw] 42"


async def test_a_turn_the_image_does_not_register_fails_at_provisioning(
    ext_env: DockerEnvironment, ext_image: str
) -> None:
    environment = EnvironmentSpec(isolation=[ContainerIsolation(image=ext_image)])
    with pytest.raises(EnvError) as e:
        await ext_env.run(image_turn(spec("nosuch")), TurnInput.new("hello"), environment)
    assert e.value.kind == "provision_failed"
    assert "agent 'ext': turn 'nosuch': not registered in the sandbox image" in str(e.value)


async def test_the_image_check_loads_the_extensions_an_agent_names(
    ext_image: str, docker_client: Any
) -> None:
    found = await check_custom_tools(
        docker_client, ext_image, "ext", [], extensions=[*spec().extensions(), ("hook", "nosuch")]
    )
    assert found.problems == [
        "agent 'ext': hook 'nosuch': not registered in the sandbox image (entry-point group airlock.hooks "
        "holds: audit); add a package that registers it to the image: airlock images build --name IMAGE "
        "--wheel FILE"
    ]
    found = await check_custom_tools(docker_client, ext_image, "ext", [], extensions=spec().extensions())
    assert found.problems == []
    assert found.extensions == [
        "provider echo-llm",
        "context strategy keep-all",
        "hook audit",
        "tool middleware tagger",
        "turn one-shot",
    ]

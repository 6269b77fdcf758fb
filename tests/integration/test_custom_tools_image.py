"""Custom tools end to end on the real engine: the example package (examples/custom_tools) built
into a wheel, then into a sandbox image with ``airlock images build --name``; a scripted agent
calls its tools in a real sandbox of that image; a broken import path fails at provisioning
naming the agent and the path; ``airlock doctor`` checks the paths in the image; build errors
are clear and leave nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.images import (
    LABEL_CUSTOM_BASE,
    LABEL_CUSTOM_PACKAGES,
    LABEL_CUSTOM_WHEELS,
)
from airlock.images._bytecode import check_argv
from airlock.images._custom_image import LABEL_CUSTOM_BASE_ID, LABEL_CUSTOM_BUILD
from airlock.images._throwaway import LABEL_THROWAWAY
from airlock.sandbox import SandboxRequest
from airlock.sandbox.docker import DockerEnvironment
from airlock.testing import scripted_agent, text_step, tool_step
from airlock.turn import InferenceStarted, ToolFinished
from layer0 import ContainerIsolation, EnvError, EnvironmentSpec, ExitReason, TurnInput

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_tools"
PYTHON = "/opt/venv/bin/python"
COUNT, TOP = "wordcount.tools:count_words", "wordcount.tools:top_words"
TEXT = "The cat saw the dog, and the dog saw the cat."
ANSWER = "11 words, 5 distinct; the most frequent: the (4), cat (2)."
#: Builds a wheel with what this venv holds: no index, no isolated build environment.
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps", "--no-build-isolation")


@pytest.fixture(scope="module")
def wordcount_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package as a wheel (built offline from a copy: the build writes beside it)."""
    work = tmp_path_factory.mktemp("wordcount")
    shutil.copytree(
        EXAMPLE, work / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    subprocess.run(
        [*PIP_WHEEL, "-w", str(work / "dist"), str(work / "src")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    [wheel] = (work / "dist").glob("*.whl")
    assert wheel.name == "wordcount-0.1.0-py3-none-any.whl"
    return wheel


def build(*args: str) -> Any:
    """``airlock images build ARGS`` through the CLI."""
    return CliRunner().invoke(app, ["images", "build", *args])


def unique(name: str) -> str:
    return f"airlock-test-{name}:{os.getpid()}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def wordcount_image(runner_image: str, wordcount_wheel: Path, docker_client: Any) -> Iterator[str]:
    """The runner image plus the wordcount wheel, built offline (no index at all)."""
    import docker.errors

    name = unique("wordcount")
    try:
        result = build("--name", name, "--base", runner_image, "--wheel", str(wordcount_wheel), "--no-index")
        assert result.exit_code == 0, result.output
        yield name
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(name, force=True)


def assert_no_build_leftovers(docker_client: Any) -> None:
    """No container and no untagged layer of a custom image build, no throwaway container."""
    for label in (LABEL_CUSTOM_BUILD, LABEL_THROWAWAY):
        assert docker_client.api.containers(all=True, filters={"label": label}) == []
    assert docker_client.api.images(all=True, filters={"label": LABEL_CUSTOM_BUILD, "dangling": True}) == []


def agent_in(image: str, *paths: str, name: str = "wc", steps: list[Any] | None = None) -> Any:
    return scripted_agent(steps or [text_step("never played")], name=name, tools=list(paths))


def request(spec: Any, image: str | None, events: list[Any] | None = None) -> SandboxRequest:
    isolation = [ContainerIsolation(image=image)] if image else []

    async def sink(event: Any) -> None:
        if events is not None:
            events.append(event)

    return SandboxRequest.compile(
        spec, TurnInput.new("go"), EnvironmentSpec(isolation=isolation), events=sink
    )


# --- the image ----------------------------------------------------------------------------------


def test_the_image_records_what_went_in_and_loads_bytecode_only(
    wordcount_image: str, runner_image: str, docker_client: Any
) -> None:
    info = docker_client.api.inspect_image(wordcount_image)
    runner = docker_client.api.inspect_image(runner_image)
    labels = info["Config"]["Labels"]
    assert labels["airlock.image"] == "custom"
    assert labels[LABEL_CUSTOM_BASE] == runner_image
    assert labels[LABEL_CUSTOM_BASE_ID] == runner["Id"]
    assert labels[LABEL_CUSTOM_WHEELS].startswith("wordcount-0.1.0-py3-none-any.whl@sha256:")
    assert labels[LABEL_CUSTOM_PACKAGES] == "wordcount==0.1.0"
    assert info["Config"]["User"] == "65534:65534"
    assert info["Config"]["Entrypoint"] == runner["Config"]["Entrypoint"]
    # A read-only sandbox never compiles: the new modules come as unchecked-hash pycs too.
    out = docker_client.containers.run(
        wordcount_image,
        entrypoint=check_argv("wordcount.tools", PYTHON),
        network_mode="none",
        read_only=True,
        remove=True,
    )
    assert out == b""
    assert_no_build_leftovers(docker_client)


def test_a_rebuild_of_the_same_inputs_is_skipped(
    wordcount_image: str, runner_image: str, wordcount_wheel: Path
) -> None:
    result = build(
        "--name", wordcount_image, "--base", runner_image, "--wheel", str(wordcount_wheel), "--no-index"
    )
    assert result.exit_code == 0, result.output
    assert "is up to date" in result.output


# --- agents in sandboxes of it ------------------------------------------------------------------


async def test_a_scripted_agent_calls_the_custom_tools_in_its_sandbox(
    env: DockerEnvironment, wordcount_image: str
) -> None:
    steps = [
        tool_step("count_words", {"text": TEXT}, id="c1", match={"tools": ["count_words", "top_words"]}),
        tool_step("top_words", {"text": TEXT, "n": 2}, id="c2"),
        text_step(ANSWER),
    ]
    events: list[Any] = []
    output = await env.sandbox.run(
        request(agent_in(wordcount_image, COUNT, TOP, steps=steps), wordcount_image, events)
    )
    assert output.exit_reason == ExitReason.complete()
    assert output.message.as_text() == ANSWER
    results = {e.name: json.loads(e.output) for e in events if isinstance(e, ToolFinished)}
    assert results == {
        "count_words": {"words": 11, "distinct": 5, "lines": 1},
        "top_words": [["the", 4], ["cat", 2]],
    }


async def test_a_broken_import_path_fails_at_provisioning_naming_agent_and_path(
    env: DockerEnvironment, wordcount_image: str, runner_image: str
) -> None:
    events: list[Any] = []
    broken = agent_in(wordcount_image, COUNT, "wordcount.nosuch:count_words", name="wc-broken")
    with pytest.raises(EnvError) as e:
        await env.sandbox.run(request(broken, wordcount_image, events))
    assert e.value.kind == "provision_failed"  # not a turn error, never retried or resumed
    assert (
        "agent 'wc-broken': custom tool 'wordcount.nosuch:count_words': module 'wordcount.nosuch' not "
        "found in the sandbox image" in str(e.value)
    )
    assert not any(isinstance(event, InferenceStarted) for event in events)
    # The runner image has no wordcount at all.
    with pytest.raises(EnvError) as e:
        await env.sandbox.run(request(agent_in(runner_image, COUNT, name="wc-plain"), None))
    assert e.value.kind == "provision_failed"
    assert "agent 'wc-plain': custom tool 'wordcount.tools:count_words': module 'wordcount' not found" in str(
        e.value
    )


CONFIG = """\
version: 1
agents:
  wc:
    provider: {{kind: scripted, script: wc.yaml}}
    tools: [{count}, {top}]
    backend: docker
    isolation: [{{type: container, image: "{image}"}}]
    defaults: {{max_turns: 4, max_duration: 60s}}
  wc-broken:
    provider: {{kind: scripted, script: wc.yaml}}
    tools: [calculator, {count}, wordcount.tools:nope]
    backend: docker
    isolation: [{{type: container, image: "{image}"}}]
    defaults: {{max_turns: 4, max_duration: 60s}}
  wc-plain:
    provider: {{kind: scripted, script: wc.yaml}}
    tools: [{count}]
    backend: docker
    isolation: [{{type: container, image: "{runner}"}}]
  wc-absent:
    provider: {{kind: scripted, script: wc.yaml}}
    tools: [{count}]
    backend: docker
    isolation: [{{type: container, image: "airlock-test-absent:{pid}"}}]
"""


@pytest.fixture
def config(
    tmp_path: Path, wordcount_image: str, runner_image: str, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    from airlock.testing import script_yaml

    monkeypatch.setenv("AIRLOCK_STATE_DIR", str(state_dir))
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)
    steps = [tool_step("count_words", {"text": TEXT}, id="c1"), text_step("11 words.")]
    (tmp_path / "wc.yaml").write_text(script_yaml(steps))
    path = tmp_path / "airlock.yaml"
    text = CONFIG.format(count=COUNT, top=TOP, image=wordcount_image, runner=runner_image, pid=os.getpid())
    path.write_text(textwrap.dedent(text))
    return path


def test_airlock_run_reports_a_broken_path_as_a_provisioning_error(config: Path, docker_client: Any) -> None:
    result = CliRunner().invoke(app, ["run", "wc-broken", "count", "--config", str(config), "--json"])
    assert result.exit_code == 3, result.output  # an environment/provisioning error, not a turn error
    error = json.loads(result.stdout)["error"]
    assert "provisioning failed" in error["message"]
    assert (
        "agent 'wc-broken': custom tool 'wordcount.tools:nope': module 'wordcount.tools' has no attribute "
        "'nope'" in error["message"]
    )


def test_airlock_run_refuses_broken_tools_before_a_sandbox_and_remembers_the_answer(
    config: Path, tmp_path: Path, docker_client: Any
) -> None:
    """The image is asked before anything is provisioned (no sandbox container is ever made for
    the run), and its answer is kept by image id: the next run asks no throwaway container."""

    def containers(label: str) -> int:
        return len(docker_client.containers.list(all=True, filters={"label": label}))

    began = time.time_ns()
    first = CliRunner().invoke(app, ["run", "wc-broken", "count", "--config", str(config), "--json"])
    again = CliRunner().invoke(app, ["run", "wc-broken", "count", "--config", str(config), "--json"])
    events = docker_client.events(
        since=began // 10**9 - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "event": "create"},
    )
    for result in (first, again):
        assert result.exit_code == 3, result.output
        message = json.loads(result.stdout)["error"]["message"]
        assert "the custom tools of agent 'wc-broken' do not load in image airlock-test-wordcount" in message
        assert "'wordcount.tools:nope': module 'wordcount.tools' has no attribute 'nope'" in message
    created = [e["Actor"]["Attributes"] for e in events if e["timeNano"] >= began]
    assert len(created) == 1, created  # the first run's check; the second one's answer was kept
    assert LABEL_THROWAWAY in created[0]
    assert not any("airlock.sandbox" in attrs for attrs in created)  # no sandbox was provisioned
    cache = json.loads((tmp_path / "data" / "tool-checks.json").read_text())
    [(key, answer)] = cache.items()
    image_id, agent, paths = json.loads(key)
    assert image_id.startswith("sha256:") and agent == "wc-broken"
    assert paths == ["wordcount.tools:count_words", "wordcount.tools:nope"]
    assert answer["problems"] and answer["tools"] == []
    assert containers(LABEL_THROWAWAY) == 0


async def test_the_controller_warns_at_start_of_agents_whose_tools_do_not_load(
    config: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from airlock.cli._tool_gate import warn_broken_tools
    from airlock.config import load_config

    with caplog.at_level("WARNING", logger="airlock.cli"):
        checks = await warn_broken_tools(load_config(config), tmp_path / "data")
    status = {c.name: c.status for c in checks}
    assert status == {
        "custom tools (wc)": "ok",
        "custom tools (wc-broken)": "error",
        "custom tools (wc-plain)": "error",
        "custom tools (wc-absent)": "warning",
    }
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 3
    assert any("custom tools (wc-broken): in image" in w and "'wordcount.tools:nope'" in w for w in warned)
    assert any("custom tools (wc-absent): not checked: image airlock-test-absent" in w for w in warned)


def test_doctor_checks_each_agents_custom_tools_in_its_image(config: Path, docker_client: Any) -> None:
    result = CliRunner().invoke(app, ["doctor", "--config", str(config), "--backend", "docker", "--json"])
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert result.exit_code == 1  # the broken agents are errors
    assert checks["custom tools (wc)"]["status"] == "ok"
    assert "2 tool(s) load in image" in checks["custom tools (wc)"]["message"]
    assert "count_words, top_words" in checks["custom tools (wc)"]["message"]
    broken = checks["custom tools (wc-broken)"]
    assert broken["status"] == "error"
    assert (
        "agent 'wc-broken': custom tool 'wordcount.tools:nope': module 'wordcount.tools' has no attribute"
        in (broken["message"])
    )
    plain = checks["custom tools (wc-plain)"]
    assert plain["status"] == "error"
    assert (
        "agent 'wc-plain': custom tool 'wordcount.tools:count_words': module 'wordcount' not found"
        in plain["message"]
    )
    absent = checks["custom tools (wc-absent)"]
    assert absent["status"] == "warning" and "is not present here" in absent["message"]
    assert_no_build_leftovers(docker_client)


# --- build errors -------------------------------------------------------------------------------


def test_a_wheel_for_another_platform_is_refused(
    runner_image: str, tmp_path: Path, docker_client: Any
) -> None:
    shutil.copy(Path(__file__), tmp_path / "fast-1.0-cp312-cp312-manylinux_2_17_x86_64.whl")
    name = unique("refused")
    result = build("--name", name, "--base", runner_image, "--wheel", str(next(tmp_path.glob("*.whl"))))
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert (
        "wheel fast-1.0-cp312-cp312-manylinux_2_17_x86_64.whl is built for cp312-cp312-manylinux_2_17_x86_64"
        in text
    )
    assert "CPython 3.11" in text
    assert docker_client.api.images(name=name.split(":")[0]) == []
    assert_no_build_leftovers(docker_client)


def test_a_requirement_that_cannot_be_downloaded(
    runner_image: str, tmp_path: Path, docker_client: Any
) -> None:
    (tmp_path / "tools.txt").write_text("airlock-test-no-such-package>=1\n")
    (tmp_path / "wheelhouse").mkdir()
    name = unique("nodownload")
    result = build(
        "--name", name, "--base", runner_image, "--requirements", str(tmp_path / "tools.txt"),
        "--no-index", "--find-links", str(tmp_path / "wheelhouse"),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"cannot download binary wheels for {name}" in text
    assert "airlock-test-no-such-package" in text
    assert docker_client.api.images(name=name.split(":")[0]) == []


def test_a_failed_build_step_leaves_nothing_behind(
    runner_image: str, wordcount_wheel: Path, docker_client: Any, tmp_path: Path
) -> None:
    import docker.errors

    # A base whose pip is gone: the image answers (python runs) but the install step fails.
    base = unique("nopip")
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text(
        f"FROM {runner_image}\nUSER 0:0\nRUN rm -f /opt/venv/bin/pip*\n"
    )
    docker_client.images.build(
        path=str(tmp_path / "ctx"), tag=base, rm=True, forcerm=True, network_mode="none"
    )
    name = unique("failing")
    try:
        result = build("--name", name, "--base", base, "--wheel", str(wordcount_wheel), "--no-index")
        assert result.exit_code == 1, result.output
        text = " ".join(result.output.split())
        assert f"docker build of {name} failed" in text
        assert "returned a non-zero code" in text
        assert docker_client.api.images(name=name.split(":")[0]) == []
        assert_no_build_leftovers(docker_client)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(base, force=True)

"""airlock.testing's public surface: every exported name imports, is documented, and works
(one smoke use per double, each on its real path: HTTP for the servers, a real turn for the
providers and agents)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import types
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

import airlock.testing
from airlock.build import build_turn
from airlock.spec import ProviderSpec
from airlock.testing import (
    DockerPods,
    EchoTurn,
    FakeAnthropicServer,
    FakeHTTPServer,
    FakeOpenAIServer,
    FakeProvider,
    FakeResponse,
    KubeApiStandIn,
    LocalEnvironment,
    LocalOrchestrator,
    PodRuntime,
    PodScript,
    RecordedRequest,
    ScriptedPods,
    anthropic_error,
    anthropic_message,
    bash_agent,
    calculator_agent,
    calculator_script,
    chat_completion,
    openai_error,
    presented_api_key,
    script_yaml,
    scripted_agent,
    text_block,
    text_response,
    text_step,
    tool_call,
    tool_response,
    tool_step,
    tool_use_block,
    tools_step,
    usage_of,
)
from layer0 import AgentId, Content, Environment, ExitReason, Orchestrator, Turn, TurnInput

Smoke = Callable[[Path], Awaitable[None]]


def test_all_lists_every_public_name_once_and_sorted() -> None:
    public = {
        name
        for name, value in vars(airlock.testing).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(airlock.testing.__all__) == sorted(public)
    assert airlock.testing.__all__ == sorted(airlock.testing.__all__)


@pytest.mark.parametrize("name", airlock.testing.__all__)
def test_every_export_imports_and_has_its_own_docstring(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from airlock.testing import {name}", namespace)
    value = namespace[name]
    doc = value.__doc__  # a class's own, never its base's
    assert doc and doc.strip(), f"{name} has no docstring"
    if dataclasses.is_dataclass(value):  # not the signature dataclasses writes when there is none
        assert not doc.startswith(f"{name}("), f"{name} has only the generated dataclass docstring"


# -- one smoke use per export -------------------------------------------------------------------

BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


async def smoke_http_server(_: Path) -> None:
    async def handler(request: RecordedRequest) -> FakeResponse:
        return FakeResponse(201, {"got": request.json()}, headers={"x-seen": request.path})

    async with FakeHTTPServer(handler) as server, httpx.AsyncClient(trust_env=False) as client:
        server.enqueue(FakeResponse(202, b"queued first"))
        first = await client.post(f"{server.origin}/a", json={"n": 1})
        second = await client.post(f"{server.origin}/b", json={"n": 2})
    assert (first.status_code, first.text) == (202, "queued first")
    assert second.status_code == 201 and second.json() == {"got": {"n": 2}}
    assert second.headers["x-seen"] == "/b"
    assert [(r.method, r.path, r.json()) for r in server.requests] == [
        ("POST", "/a", {"n": 1}),
        ("POST", "/b", {"n": 2}),
    ]


async def smoke_anthropic_server(_: Path) -> None:
    async with (
        FakeAnthropicServer(require_api_key="sk-test") as server,
        httpx.AsyncClient(base_url=server.base_url, trust_env=False) as client,
    ):
        server.reply(
            [text_block("Computing."), tool_use_block("t1", "calc", {"x": 1})], stop_reason="tool_use"
        )
        server.enqueue(anthropic_error(529, "busy"))
        server.reply(anthropic_message("done"))
        answered = await client.post("/v1/messages", json=BODY, headers={"x-api-key": "sk-test"})
        busy = await client.post("/v1/messages", json=BODY, headers={"authorization": "Bearer sk-test"})
        refused = await client.post("/v1/messages", json=BODY, headers={"x-api-key": "wrong"})
        final = await client.post("/v1/messages", json=BODY, headers={"x-api-key": "sk-test"})
    assert answered.json()["content"][1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "calc",
        "input": {"x": 1},
    }
    assert busy.status_code == 529 and busy.json()["error"]["message"] == "busy"
    assert busy.headers["request-id"] == busy.json()["request_id"]
    assert refused.status_code == 401
    assert final.json()["content"] == [{"type": "text", "text": "done"}]
    assert [presented_api_key(r) for r in server.requests] == ["sk-test", "sk-test", "wrong", "sk-test"]


async def smoke_openai_server(_: Path) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        FakeOpenAIServer() as server,
        httpx.AsyncClient(base_url=server.base_url, trust_env=False) as client,
    ):
        server.reply(
            chat_completion(tool_calls=[tool_call("c1", "add", {"a": 1})], finish_reason="tool_calls")
        )
        server.enqueue(openai_error(429, "slow down"))
        called = await client.post("/chat/completions", json=body)
        limited = await client.post("/chat/completions", json=body)
    (choice,) = called.json()["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1}'}
    assert limited.status_code == 429 and limited.json()["error"]["message"] == "slow down"


async def smoke_fake_provider(_: Path) -> None:
    provider = FakeProvider(
        [
            tool_response(("c1", "calculator", {"expression": "2 + 3"}), cost=Decimal("0.001")),
            text_response("five", tokens_in=7, tokens_out=2),
        ]
    )
    turn = build_turn(scripted_agent([], tools=["calculator"]), provider=provider)
    out = await turn.execute(TurnInput.new("2 + 3?"))
    assert out.message == Content.text("five") and provider.calls == 2
    assert [(r.name, r.success) for r in out.metadata.tools_called] == [("calculator", True)]
    assert provider.requests[1].messages[2].content[0].content == "5"
    assert (
        usage_of(text_response("x", tokens_in=7, tokens_out=2)).items()
        >= {
            "input_tokens": 7,
            "output_tokens": 2,
        }.items()
    )


async def smoke_echo_environment_orchestrator(_: Path) -> None:
    orchestrator = LocalOrchestrator()
    assert isinstance(orchestrator, Orchestrator) and isinstance(LocalEnvironment(), Environment)
    assert isinstance(EchoTurn(), Turn)
    agent = orchestrator.register("echo", EchoTurn(), environment=LocalEnvironment())
    out = await orchestrator.dispatch(agent, TurnInput.new("hello"))
    assert out.message == Content.text("hello") and out.exit_reason == ExitReason.complete()
    assert orchestrator.agents == [AgentId("echo")]


async def smoke_scripted_agents(workspace: Path) -> None:
    calc = await build_turn(calculator_agent()).execute(TurnInput.new("What is 17 * 23?"))
    assert calc.message == Content.text("17 x 23 = 391.") and calc.metadata.cost == Decimal("0.0003")
    assert [(s["response"]["stop_reason"]) for s in calculator_script()] == ["tool_use", "end_turn"]

    bash = await build_turn(bash_agent("echo one", "echo two", final="ran"), workspace=workspace).execute(
        TurnInput.new("go")
    )
    assert bash.message == Content.text("ran") and len(bash.metadata.tools_called) == 2
    assert (bash.metadata.tokens_in, bash.metadata.cost) == (10 + 11 + 20, Decimal("0.0004"))

    steps = [
        tool_step("calculator", {"expression": "1 + 1"}, text="Adding."),
        tools_step([("calculator", {"expression": "2 * 2"}), ("calculator", {"expression": "3 - 3"})]),
        text_step("2, 4 and 0", match={"messages": 5}),
    ]
    path = workspace / "script.yaml"
    path.write_text(script_yaml(steps))
    agent = scripted_agent([], name="from-file", tools=["calculator"])
    agent = agent.model_copy(update={"provider": ProviderSpec(kind="scripted", script=str(path))})
    out = await build_turn(agent).execute(TurnInput.new("sums"))
    assert out.message == Content.text("2, 4 and 0") and len(out.metadata.tools_called) == 3


def kube_stand_in_round_trip(workspace: Path) -> None:
    """The official client, from a kubeconfig, against the stand-in and its scripted pods."""
    from kubernetes import client, config

    def script(pod: dict[str, Any]) -> PodScript:
        pulling = pod["metadata"]["name"] == "broken"
        return PodScript(waiting_reason="ImagePullBackOff") if pulling else PodScript()

    pods = ScriptedPods(script)
    assert isinstance(pods, PodRuntime)
    with KubeApiStandIn(pods=pods, namespaces=("jobs",)) as api:
        kubeconfig = api.write_kubeconfig(workspace / "kubeconfig", namespace="jobs")
        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        core = client.CoreV1Api(api_client)
        for name in ("works", "broken"):
            body = {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            }
            core.create_namespaced_pod("jobs", body)
        pods.set_logs("jobs", "works", "main", "one\ntwo\n")
        works = core.read_namespaced_pod("works", "jobs").status
        broken = core.read_namespaced_pod("broken", "jobs").status
        assert works.phase == "Running" and works.pod_ip.startswith("10.244.")
        assert broken.phase == "Pending"
        assert broken.container_statuses[0].state.waiting.reason == "ImagePullBackOff"
        assert core.read_namespaced_pod_log("works", "jobs", tail_lines=1) == "two\n"
        api_client.close()
    assert [m for m, _ in api.requests].count("POST") == 2


async def smoke_kube_stand_in(workspace: Path) -> None:
    await asyncio.to_thread(kube_stand_in_round_trip, workspace)


def docker_pods_round_trip(workspace: Path) -> None:
    """A pod through the stand-in, its container run by DockerPods on the local engine."""
    import docker
    from kubernetes import client, config

    from airlock.images import runner_image_tag

    try:
        docker.from_env().images.get(runner_image_tag())
    except docker.errors.DockerException as e:
        pytest.skip(f"DockerPods needs the local Docker engine and the runner image ({e})")
    pods = DockerPods()
    try:
        assert isinstance(pods, PodRuntime)
        with KubeApiStandIn(pods=pods, namespaces=("jobs",)) as api:
            kubeconfig = api.write_kubeconfig(workspace / "kubeconfig", namespace="jobs")
            core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
            command = ["/opt/venv/bin/python", "-c", "print('from docker')"]
            container = {"name": "main", "image": runner_image_tag(), "command": command}
            body = {"metadata": {"name": "hi"}, "spec": {"restartPolicy": "Never", "containers": [container]}}
            core.create_namespaced_pod("jobs", body)
            deadline = time.monotonic() + 30
            while core.read_namespaced_pod("hi", "jobs").status.phase != "Succeeded":
                assert time.monotonic() < deadline, "the pod did not succeed"
                time.sleep(0.1)
            assert core.read_namespaced_pod_log("hi", "jobs") == "from docker\n"
    finally:
        pods.close()


async def smoke_docker_pods(workspace: Path) -> None:
    await asyncio.to_thread(docker_pods_round_trip, workspace)


SMOKES: list[tuple[tuple[str, ...], Smoke]] = [
    (("FakeHTTPServer", "FakeResponse", "RecordedRequest"), smoke_http_server),
    (
        (
            "FakeAnthropicServer",
            "anthropic_error",
            "anthropic_message",
            "presented_api_key",
            "text_block",
            "tool_use_block",
        ),
        smoke_anthropic_server,
    ),
    (("FakeOpenAIServer", "chat_completion", "openai_error", "tool_call"), smoke_openai_server),
    (("FakeProvider", "text_response", "tool_response", "usage_of"), smoke_fake_provider),
    (("EchoTurn", "LocalEnvironment", "LocalOrchestrator"), smoke_echo_environment_orchestrator),
    (("KubeApiStandIn", "PodRuntime", "PodScript", "ScriptedPods"), smoke_kube_stand_in),
    (("DockerPods",), smoke_docker_pods),
    (
        (
            "bash_agent",
            "calculator_agent",
            "calculator_script",
            "script_yaml",
            "scripted_agent",
            "text_step",
            "tool_step",
            "tools_step",
        ),
        smoke_scripted_agents,
    ),
]


def test_every_export_has_a_smoke_use() -> None:
    covered = [name for names, _ in SMOKES for name in names]
    assert sorted(covered) == sorted(airlock.testing.__all__)


@pytest.mark.parametrize("smoke", [s for _, s in SMOKES], ids=[s.__name__ for _, s in SMOKES])
async def test_smoke(smoke: Smoke, tmp_path: Path) -> None:
    await smoke(tmp_path)

"""LocalModelServer lifecycle against the real server script with a fake ``llama_cpp``.

The server subprocess is the real ``_server_main.py`` (real HTTP, template rendering and
tool-call parsing) running in this interpreter with ``fake_runtime/llama_cpp.py`` on its path.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import openai
import pytest

from airlock.localmodel import (
    CachePaths,
    LocalModelServer,
    ModelFileError,
    RuntimeSetupError,
    ServerInfo,
    ServerStartError,
    model_path,
    verify_model,
)

from .localmodel_fakes import FAKE_RUNTIME, FakeModel, free_port

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOL_CALL_REPLY = (
    'I will add them.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
)


@pytest.fixture
async def installed(cache: CachePaths, fake_model: FakeModel) -> FakeModel:
    """The fake model file in the cache, verified."""
    path = model_path(cache, fake_model.spec)
    path.parent.mkdir(parents=True)
    path.write_bytes(fake_model.content)
    assert await verify_model(cache, fake_model.spec, full=True) == "verified"
    return fake_model


def make_server(
    cache: CachePaths, model: FakeModel, tmp_path: Path, *, port: int = 0, **env: str
) -> LocalModelServer:
    replies = env.pop("replies", json.dumps([TOOL_CALL_REPLY, "The sum is 5."]))
    return LocalModelServer(
        paths=cache,
        model=model.spec,
        host="127.0.0.1",
        port=port,
        python=sys.executable,
        startup_timeout=float(env.pop("timeout", "20")),
        extra_env={
            "PYTHONPATH": str(FAKE_RUNTIME),
            "FAKE_LLAMA_REPLIES": replies,
            "FAKE_LLAMA_PROMPTS": str(tmp_path / "prompts.jsonl"),
            **env,
        },
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A reaped child is gone; an unreaped one would be a zombie: check its state.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def cmdline_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.fixture
async def server(cache: CachePaths, installed: FakeModel, tmp_path: Path) -> AsyncIterator[LocalModelServer]:
    srv = make_server(cache, installed, tmp_path)
    await srv.start()
    yield srv
    await srv.stop()


async def test_openai_sdk_runs_a_tool_loop(server: LocalModelServer, tmp_path: Path) -> None:
    assert server.started_here
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key or "", max_retries=0)
    messages: list[dict[str, object]] = [{"role": "user", "content": "What is 2+3?"}]
    first = await client.chat.completions.create(
        model="anything",
        messages=messages,
        tools=[ADD_TOOL],  # type: ignore[arg-type,list-item]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "I will add them."
    assert choice.message.tool_calls is not None and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "add"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"a": 2, "b": 3}  # type: ignore[union-attr]
    assert first.usage is not None and first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.model == "fake-model"

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "5"})
    second = await client.chat.completions.create(
        model="anything",
        messages=messages,
        tools=[ADD_TOOL],  # type: ignore[arg-type,list-item]
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "The sum is 5."
    assert second.choices[0].message.tool_calls is None

    prompts = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert '"name": "add"' in prompts[0]["prompt"]  # the tool is in the prompt
    assert '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>' in prompts[1]["prompt"]
    assert "<|im_start|>tool\n5<|im_end|>" in prompts[1]["prompt"]
    # Deterministic by default.
    assert prompts[0]["sampling"]["temperature"] == 0.0 and prompts[0]["sampling"]["seed"] == 0
    assert "<tool_response>" in prompts[0]["stop"]

    models = await client.models.list()
    assert [m.id for m in models.data] == ["fake-model"]
    await client.close()


async def test_streaming_tool_calls(server: LocalModelServer) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key or "", max_retries=0)
    stream = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "2+3?"}],
        tools=[ADD_TOOL],  # type: ignore[list-item]
        stream=True,
        stream_options={"include_usage": True},
    )
    names, args, finish, usage = [], "", None, None
    async for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                if tc.function and tc.function.name:
                    names.append(tc.function.name)
                args += (tc.function.arguments or "") if tc.function else ""
            finish = ch.finish_reason or finish
    assert names == ["add"] and json.loads(args) == {"a": 2, "b": 3}
    assert finish == "tool_calls" and usage is not None and usage.total_tokens > 0
    await client.close()


async def test_api_key_is_required(server: LocalModelServer) -> None:
    assert server.api_key and len(server.api_key) >= 32
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    await client.close()
    async with httpx.AsyncClient(trust_env=False) as http:
        health = await http.get(server.base_url.removesuffix("/v1") + "/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    # The key never appears on the command line.
    assert server.info is not None
    assert server.api_key.encode() not in cmdline_of(server.info.pid)


async def test_state_file_is_private(server: LocalModelServer, cache: CachePaths) -> None:
    assert server.info is not None
    state = cache.servers_dir / f"127.0.0.1-{server.info.port}.json"
    assert state.stat().st_mode & 0o777 == 0o600
    assert ServerInfo.model_validate_json(state.read_text()) == server.info
    assert "api_key" not in repr(server.info)


async def test_reuse_a_running_server_then_stop(
    cache: CachePaths, installed: FakeModel, tmp_path: Path
) -> None:
    port = free_port()
    first = make_server(cache, installed, tmp_path, port=port)
    info = await first.start()
    try:
        async with make_server(cache, installed, tmp_path, port=port) as second:
            assert not second.started_here
            assert second.info == info
            assert second.api_key == first.api_key
        assert alive(info.pid), "leaving the reusing context must not stop a server it did not start"
    finally:
        await first.stop()
    assert not alive(info.pid)
    assert not (cache.servers_dir / f"127.0.0.1-{port}.json").exists()


async def test_stop_by_address_from_another_manager(
    cache: CachePaths, installed: FakeModel, tmp_path: Path
) -> None:
    port = free_port()
    info = await make_server(cache, installed, tmp_path, port=port).start()
    other = make_server(cache, installed, tmp_path, port=port)
    assert await other.running() == info
    await other.stop()
    for _ in range(100):
        if not alive(info.pid):
            break
        await __import__("asyncio").sleep(0.05)
    assert not alive(info.pid)
    assert await other.running() is None
    await other.stop()  # idempotent


async def test_context_manager_starts_and_stops(
    cache: CachePaths, installed: FakeModel, tmp_path: Path
) -> None:
    async with make_server(cache, installed, tmp_path) as srv:
        assert srv.info is not None
        pid = srv.info.pid
        assert alive(pid)
    assert not alive(pid)
    assert srv.info is None


async def test_stale_state_file_is_replaced(cache: CachePaths, installed: FakeModel, tmp_path: Path) -> None:
    port = free_port()
    cache.servers_dir.mkdir(parents=True)
    stale = ServerInfo(
        pid=2**22 - 7, host="127.0.0.1", port=port, model_id="fake-model",
        model_sha256=installed.spec.sha256, log_path="x", started_at=0,
    )  # fmt: skip
    (cache.servers_dir / f"127.0.0.1-{port}.json").write_text(stale.model_dump_json())
    async with make_server(cache, installed, tmp_path, port=port) as srv:
        assert srv.started_here and srv.info is not None and srv.info.pid != stale.pid


async def test_failed_load_reports_the_server_log(
    cache: CachePaths, installed: FakeModel, tmp_path: Path
) -> None:
    srv = make_server(cache, installed, tmp_path, FAKE_LLAMA_FAIL="unknown model architecture: 'qwen9'")
    with pytest.raises(ServerStartError, match="exited with code 3") as info:
        await srv.start()
    assert "unknown model architecture: 'qwen9'" in info.value.log_tail
    assert "unknown model architecture" in str(info.value)
    assert srv.info is None
    assert not list(cache.servers_dir.glob("*.json"))


async def test_start_timeout_kills_the_server(
    cache: CachePaths, installed: FakeModel, tmp_path: Path
) -> None:
    srv = make_server(cache, installed, tmp_path, FAKE_LLAMA_LOAD_SECONDS="60", timeout="1")
    with pytest.raises(ServerStartError, match="did not become healthy within 1s"):
        await srv.start()
    log = (cache.servers_dir / "127.0.0.1-0.log").read_text()
    pid = json.loads(log.splitlines()[0])["pid"]
    assert not alive(pid)


async def test_port_in_use_is_a_start_error(cache: CachePaths, installed: FakeModel, tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        srv = make_server(cache, installed, tmp_path, port=port)
        with pytest.raises(ServerStartError) as info:
            await srv.start()
    assert f"cannot listen on 127.0.0.1:{port}" in info.value.log_tail


async def test_missing_model_is_a_clear_error(
    cache: CachePaths, fake_model: FakeModel, tmp_path: Path
) -> None:
    srv = make_server(cache, fake_model, tmp_path)
    with pytest.raises(ModelFileError, match="missing; fetch it first"):
        await srv.start()


async def test_corrupt_model_is_a_clear_error(
    cache: CachePaths, installed: FakeModel, tmp_path: Path
) -> None:
    path = model_path(cache, installed.spec)
    path.write_bytes(path.read_bytes()[:-10])
    srv = make_server(cache, installed, tmp_path)
    with pytest.raises(ModelFileError, match="partial or corrupt") as info:
        await srv.start()
    assert info.value.repairable


async def test_missing_runtime_is_a_clear_error(cache: CachePaths, installed: FakeModel) -> None:
    srv = LocalModelServer(paths=cache, model=installed.spec, port=0)
    with pytest.raises(RuntimeSetupError, match="not set up"):
        await srv.start()
    with pytest.raises(Exception, match="not started"):
        _ = srv.base_url

"""The wire-level stand-ins themselves, driven with raw HTTP (httpx) and raw sockets."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from airlock.testing._anthropic_server import FakeAnthropicServer, anthropic_message
from airlock.testing._fake_http import FakeResponse, RecordedRequest
from airlock.testing._openai_server import FakeOpenAIServer

MESSAGES_BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


async def test_binds_loopback_ephemeral_port_and_closes() -> None:
    async with FakeAnthropicServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        port = server.port
        assert port > 0
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (529, "overloaded_error"),
    ],
)
async def test_anthropic_error_body_shape(status: int, error_type: str) -> None:
    async with FakeAnthropicServer() as server, httpx.AsyncClient() as client:
        server.fail(status, "boom")
        r = await client.post(f"{server.base_url}/v1/messages", json=MESSAGES_BODY)
        assert r.status_code == status
        assert r.json()["type"] == "error"
        assert r.json()["error"] == {"type": error_type, "message": "boom"}
        assert r.headers["request-id"] == r.json()["request_id"]


async def test_anthropic_validation_records_headers_and_keeps_queue() -> None:
    async with FakeAnthropicServer(require_api_key="sk-1") as server, httpx.AsyncClient() as client:
        server.reply("ok")
        r = await client.post(
            f"{server.base_url}/v1/messages", json=MESSAGES_BODY, headers={"x-api-key": "nope"}
        )
        assert r.status_code == 401
        r = await client.post(
            f"{server.base_url}/v1/messages", json={"model": "m"}, headers={"x-api-key": "sk-1"}
        )
        assert (r.status_code, r.json()["error"]["message"]) == (400, "max_tokens: Field required")
        r = await client.post(
            f"{server.base_url}/v1/complete", json=MESSAGES_BODY, headers={"x-api-key": "sk-1"}
        )
        assert r.status_code == 404
        assert server.pending == 1
        r = await client.post(
            f"{server.base_url}/v1/messages", json=MESSAGES_BODY, headers={"x-api-key": "sk-1"}
        )
        assert r.json()["content"] == [{"type": "text", "text": "ok"}]
        assert [req.headers["x-api-key"] for req in server.requests] == ["nope", "sk-1", "sk-1", "sk-1"]


async def test_handler_function_sync_and_async_and_its_errors() -> None:
    def handler(request: RecordedRequest) -> FakeResponse:
        return FakeResponse(200, anthropic_message(f"echo {request.json()['messages'][0]['content']}"))

    async def failing(request: RecordedRequest) -> FakeResponse:
        raise RuntimeError("handler bug")

    async with FakeAnthropicServer(handler) as server, httpx.AsyncClient() as client:
        r = await client.post(f"{server.base_url}/v1/messages", json=MESSAGES_BODY)
        assert r.json()["content"][0]["text"] == "echo hi"
        server.handler = failing
        r = await client.post(f"{server.base_url}/v1/messages", json=MESSAGES_BODY)
        assert r.status_code == 500
        assert [str(e) for e in server.handler_errors] == ["handler bug"]
        server.handler = None
        r = await client.post(f"{server.base_url}/v1/messages", json=MESSAGES_BODY)
        assert r.status_code == 500 and "no response queued" in r.json()["error"]["message"]


async def test_chunked_request_body_and_keep_alive() -> None:
    async with FakeAnthropicServer() as server:
        server.reply("one")
        server.reply("two")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        body = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        for _ in range(2):  # two requests on one connection
            writer.write(
                b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Content-Type: application/json\r\n\r\n" + chunked
            )
            await writer.drain()
            status = await reader.readline()
            assert status.startswith(b"HTTP/1.1 200")
            headers = {}
            while (line := await reader.readline()) != b"\r\n":
                k, _, v = line.decode().partition(":")
                headers[k.lower()] = v.strip()
            await reader.readexactly(int(headers["content-length"]))
        writer.close()
        assert [r.json() for r in server.requests] == [MESSAGES_BODY, MESSAGES_BODY]


async def test_openai_shapes_models_and_tool_message_rule() -> None:
    async with (
        FakeOpenAIServer(require_api_key="sk-o", model="qwen") as server,
        httpx.AsyncClient(headers={"authorization": "Bearer sk-o"}) as client,
    ):
        r = await client.get(f"{server.base_url}/models")
        assert r.json()["data"][0]["id"] == "qwen"
        server.reply("ok")
        r = await client.post(
            f"{server.base_url}/chat/completions",
            json={"model": "qwen", "messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]},
        )
        assert r.status_code == 400 and "role 'tool'" in r.json()["error"]["message"]
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
        server.fail(429, "slow")
        r = await client.post(f"{server.base_url}/chat/completions", json={"model": "qwen", "messages": []})
        assert r.status_code == 200  # the queued 200 comes first
        r = await client.post(f"{server.base_url}/chat/completions", json={"model": "qwen", "messages": []})
        assert (r.status_code, r.json()["error"]["code"]) == (429, "rate_limit_exceeded")
        r = await client.get(f"{server.base_url}/models", headers={"authorization": "Bearer bad"})
        assert r.status_code == 401

"""The real offline model end to end: fetch, runtime, server, the official openai SDK.

Slow on a cold cache (the llama-cpp-python wheel compiles for ~5 minutes; the model download
is ~1.1 GB); seconds once cached under ``$AIRLOCK_CACHE_DIR`` (default ``~/.cache/airlock``).
Asserts the tool loop's mechanics, not the model's arithmetic. Prints the measured timings.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from airlock.localmodel import LocalModelServer, ProgressEvent

ADD_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers and return their sum.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
SYSTEM = (
    "You are a helpful assistant. Use tools when needed. "
    "When a tool returns a result, answer the user in one sentence."
)


def rss_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_real_model_tool_loop_with_openai_sdk() -> None:
    phases: dict[str, list[float]] = {}

    def progress(event: ProgressEvent) -> None:
        now = time.monotonic()
        span = phases.setdefault(event.phase, [now, now])
        span[1] = now

    t0 = time.monotonic()
    server = LocalModelServer(port=0, startup_timeout=300)
    await server.ensure_ready(progress)
    timings = {"set-up total (ensure_ready)": time.monotonic() - t0}
    for phase, (start, end) in phases.items():
        if phase != "done":
            timings[f"  phase {phase}"] = end - start

    t_start = time.monotonic()
    async with server:
        timings["server start until healthy"] = time.monotonic() - t_start
        assert server.info is not None
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key or "", max_retries=0)

        t = time.monotonic()
        one = await client.chat.completions.create(
            model="local", messages=[{"role": "user", "content": "Hi"}], max_tokens=1
        )
        timings["first token (cold prompt, max_tokens=1)"] = time.monotonic() - t
        assert one.choices[0].finish_reason == "length"

        messages: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 1234 + 5678? Use the add tool."},
        ]
        t = time.monotonic()
        calls_seen = 0
        final: str | None = None
        for _ in range(4):  # the model may call the tool more than once
            resp = await client.chat.completions.create(model="local", messages=messages, tools=[ADD_TOOL])
            choice = resp.choices[0]
            messages.append(choice.message.model_dump(exclude_none=True))
            if not choice.message.tool_calls:
                assert choice.finish_reason == "stop"
                final = choice.message.content
                break
            assert choice.finish_reason == "tool_calls"
            for call in choice.message.tool_calls:
                assert call.function.name == "add"  # type: ignore[union-attr]
                args = json.loads(call.function.arguments)  # type: ignore[union-attr]
                calls_seen += 1
                result = int(args["a"]) + int(args["b"])
                messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
        timings["tool round trip (call -> result -> answer)"] = time.monotonic() - t
        mem = rss_kib(server.info.pid)
        await client.close()

    assert calls_seen >= 1, "the model's tool call was not parsed into tool_calls"
    assert final, "no final answer after the tool result"
    print("\nreal offline model timings:")
    for name, seconds in timings.items():
        print(f"  {name:<45} {seconds:8.2f} s")
    print(f"  {'server RSS / peak':<45} {mem['VmRSS'] / 1024:8.0f} / {mem['VmHWM'] / 1024:.0f} MiB")
    print(f"  final answer: {final!r}")

"""Quickstart: an agent with a calculator tool on the scripted provider (offline, deterministic).

Run: ``.venv/bin/python examples/quickstart.py`` — prints the answer, tokens, cost and tools called.
"""

from __future__ import annotations

import asyncio

from airlock.build import build_turn
from airlock.spec import AgentSpec
from layer0 import Content, TriggerType, TurnInput

spec = AgentSpec.model_validate(
    {
        "name": "calc",
        "provider": {
            "kind": "scripted",
            "script": [
                {
                    "response": {
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "t1",
                                "name": "calculator",
                                "input": {"expression": "17 * 23"},
                            }
                        ],
                        "stop_reason": "tool_use",
                        "usage": {"input_tokens": 40, "output_tokens": 12},
                        "cost": "0.0001",
                    }
                },
                {
                    "response": {
                        "content": [{"type": "text", "text": "17 * 23 = 391"}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 60, "output_tokens": 8},
                        "cost": "0.0001",
                    }
                },
            ],
        },
        "tools": ["calculator"],
    }
)


async def main() -> None:
    out = await build_turn(spec).execute(
        TurnInput(message=Content.text("What is 17 * 23?"), trigger=TriggerType.user())
    )
    m = out.metadata
    print(
        out.message.as_text(),
        "|",
        m.tokens_in,
        "in",
        m.tokens_out,
        "out | $",
        m.cost,
        "|",
        [t.name for t in m.tools_called],
    )


if __name__ == "__main__":
    asyncio.run(main())

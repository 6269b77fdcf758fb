"""Quickstart: an agent with a calculator tool on the scripted provider (offline, deterministic).

Run: ``.venv/bin/python examples/quickstart.py`` — prints the answer, tokens, cost and tools called.
"""

from __future__ import annotations

import asyncio

from airlock.build import build_turn
from airlock.spec import AgentSpec, ProviderSpec
from airlock.testing import calculator_script
from layer0 import Content, TriggerType, TurnInput

#: The scripted provider plays a recorded conversation: the model asks the calculator for
#: 17 * 23, reads the result, then answers (see airlock.testing.calculator_script).
spec = AgentSpec(
    name="calc",
    provider=ProviderSpec(kind="scripted", script=calculator_script()),
    tools=["calculator"],
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

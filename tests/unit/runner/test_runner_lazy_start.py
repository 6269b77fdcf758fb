"""The runner serves health before it loads what only a turn needs.

``python -m airlock.runner`` imports its package, confines itself (which adopts orphans from
``airlock.tools``) and starts the server; the turn machinery (the loop, its tools and
providers, jsonschema, yaml) and the layer0 types no turn exchanges load at the first
Execute, or right after SERVING with ``--preload``. Checked in fresh interpreters: this
process has imported everything already.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from airlock.runner.__main__ import TOKEN_ENV

#: Modules a runner must not have loaded while it only serves health.
DEFERRED = (
    "jsonschema",
    "yaml",
    "anthropic",
    "openai",
    "airlock.providers",
    "airlock.tools._bash",
    "airlock.tools._calculator",
    "airlock.tools._files",
    "airlock.tools._http",
    "airlock.turn._effect_tools",
    "airlock.turn._neuron",
    "airlock.turn._registry",
    "airlock.turn._loop",
    "layer0._environment",
    "layer0._hook",
    "layer0._lifecycle",
    "layer0._orchestrator",
)

#: Prints the loaded modules once the server is SERVING, then again after building a turn.
SCRIPT = """
import asyncio, json, sys
from pathlib import Path

import airlock.runner.__main__
from airlock.tools import adopt_orphans  # what confine_self() imports


async def serve() -> None:
    from airlock.runner._server import RunnerConfig, RunnerServer

    server = RunnerServer(RunnerConfig(token="t" * 32, workspace=Path(sys.argv[1])))
    await server.start("unix:" + sys.argv[1] + "/runner.sock")
    print(json.dumps(sorted(sys.modules)), flush=True)
    await server.stop(0)


asyncio.run(serve())

from airlock.build import build_turn
from airlock.testing import scripted_agent, text_step

spec = scripted_agent([text_step("ok")], name="lazy", tools=["calculator", "read_file"])
build_turn(spec, workspace=Path(sys.argv[1]))
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(tmp_path: Path) -> tuple[set[str], set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    serving, built = (set(json.loads(line)) for line in out.splitlines())
    return serving, built


def test_serving_loads_no_turn_machinery_and_the_first_turn_does(tmp_path: Path) -> None:
    serving, built = loaded_modules(tmp_path)
    assert "grpc" in serving and "airlock.runner._server" in serving
    assert not serving & set(DEFERRED), "loaded before the first turn"
    for module in ("jsonschema", "airlock.providers", "airlock.tools._calculator", "airlock.turn._neuron"):
        assert module in built, module


def test_adopting_orphans_loads_neither_the_tools_nor_pydantic() -> None:
    script = (
        "import json, sys; from airlock.tools import adopt_orphans; print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert "airlock.tools._orphans" in loaded
    assert not loaded & {"pydantic", "airlock.spec", "airlock.turn", "airlock.tools._bash"}


def test_preload_loads_what_the_first_turn_needs() -> None:
    script = "import json, sys; from airlock.runner.__main__ import preload; preload(); "
    script += "print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    sdks = {"anthropic", "openai"}  # imported when a provider is created, with or without preload
    assert not set(DEFERRED) - sdks - set(json.loads(out.stdout))


def test_a_preloading_runner_says_so_after_serving_and_stops_cleanly(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "airlock.runner", "--listen", f"unix:{tmp_path}/r.sock", "--preload"]
    env = os.environ | {TOKEN_ENV: "t" * 32}
    with subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        messages = []
        for line in proc.stdout:
            messages.append(json.loads(line)["msg"])
            if messages[-1] == "preloaded":
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert messages[-2:] == ["serving", "preloaded"]

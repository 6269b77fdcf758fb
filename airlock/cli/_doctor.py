"""``airlock doctor``: is this machine ready to run agents? One line per check."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from rich.markup import escape

from airlock.sandbox import DoctorCheck as Check

from ._common import EXIT_INCOMPLETE, EXIT_OK, console

Status = Literal["ok", "warning", "error"]


def check_local_model() -> list[Check]:
    """The local model file (verified, never downloaded here) and its runtime."""
    from airlock.localmodel import (
        QWEN_CODER_1_5B,
        CachePaths,
        LocalModelError,
        cached_wheel,
        model_path,
        runtime_ready,
        verify_model,
    )

    paths = CachePaths.default()
    out = []
    path = model_path(paths, QWEN_CODER_1_5B)
    try:
        state = asyncio.run(verify_model(paths, QWEN_CODER_1_5B))
    except LocalModelError as e:
        out.append(
            Check(
                "local model",
                "error",
                f"model file {path} is unusable: {e}",
                f"delete {path}; the next run of a local-model agent fetches it again",
            )
        )
    else:
        if state == "missing":
            out.append(
                Check(
                    "local model",
                    "warning",
                    f"model {QWEN_CODER_1_5B.filename} not cached ({path})",
                    "the first run of a local-model agent (e.g. `demo`) downloads it "
                    f"(~{QWEN_CODER_1_5B.size / 1e9:.1f} GB)",
                )
            )
        else:
            out.append(Check("local model", "ok", f"model {QWEN_CODER_1_5B.filename} cached and verified"))
    if runtime_ready(paths):
        out.append(Check("model runtime", "ok", f"llama-cpp-python runtime ready ({paths.venv_dir})"))
    elif cached_wheel(paths) is not None:
        out.append(
            Check(
                "model runtime",
                "warning",
                "llama-cpp-python wheel cached but its venv is not set up",
                "the first run of a local-model agent installs it (no download)",
            )
        )
    else:
        out.append(
            Check(
                "model runtime",
                "warning",
                "llama-cpp-python runtime not built",
                "the first run of a local-model agent builds it (needs a C compiler; takes minutes)",
            )
        )
    return out


def check_config(path: Path | None) -> Check:
    """A configuration is found and valid."""
    from airlock.config import InvalidConfigError, find_config, load_config
    from airlock.errors import ConfigError

    try:
        where = find_config(path)
    except ConfigError as e:
        status: Status = "error" if path is not None else "warning"
        return Check(
            "config", status, str(e), "create airlock.yaml (see examples/airlock.yaml) or pass --config"
        )
    try:
        cfg = load_config(path)
    except InvalidConfigError as e:
        return Check(
            "config",
            "error",
            f"{where} is invalid:\n" + "\n".join(f"  {i}" for i in e.issues),
            "fix the problems listed (file:line:col)",
        )
    except ConfigError as e:
        return Check("config", "error", str(e), "fix the configuration")
    names = ", ".join(sorted(cfg.agents)) or "none"
    return Check("config", "ok", f"{where} is valid ({len(cfg.agents)} agent(s): {names})")


def check_custom_tools(path: Path | None, only: str | None = None) -> list[Check]:
    """For each agent with custom tools (of backend ``only``, when named): do they import, and
    give valid tools, in its sandbox image? Checked in a throwaway container of that image
    (no network, read-only, non-root) when the image is present here; nothing is built."""
    from airlock.config import load_config
    from airlock.errors import ConfigError

    from ._tool_gate import custom_tool_checks

    try:
        agents = [a for a in load_config(path).agents.values() if a.spec.custom_tools]
    except ConfigError:
        return []  # the config check reports why
    agents = [a for a in agents if only is None or a.backend == only]
    if not agents:
        return []
    return asyncio.run(custom_tool_checks(agents))


async def _backend_checks(settings: Mapping[str, BaseModel], only: str | None = None) -> list[Check]:
    from airlock.sandbox import backends

    chosen = [b for b in backends() if only is None or b.name == only]
    found = await asyncio.gather(*(b.doctor(settings.get(b.name)) for b in chosen))
    return [check for checks in found for check in checks]


def _configured_settings(path: Path | None) -> Mapping[str, BaseModel]:
    """The backends' settings of the configuration, when it loads (its problems are reported
    by the config check)."""
    from airlock.config import load_config
    from airlock.errors import ConfigError

    try:
        return load_config(path).backend_settings
    except ConfigError:
        return {}


def run_checks(config: Path | None, backend: str | None = None, probe: str | None = None) -> list[Check]:
    """Every check, in order: each sandbox backend's (with its configured settings; only
    ``backend``'s when named), the local model's, the configuration's, and its agents' custom
    tools in their images (nothing is downloaded or built; a check container may start). With
    ``probe`` (a deployment the backend can name, e.g. a Helm release), the backend's
    install-time proof of isolation runs too: jobs really run there."""
    settings = _configured_settings(config)
    checks = asyncio.run(_backend_checks(settings, backend))
    if probe is not None and backend is not None:
        from airlock.sandbox import backend as backend_named

        run_probe = backend_named(backend).probe
        assert run_probe is not None  # checked by the command
        checks += asyncio.run(run_probe(settings.get(backend), probe))
    if backend is None:
        checks += check_local_model()
    checks.append(check_config(config))
    checks += check_custom_tools(config, backend)
    return checks


_MARK = {"ok": "[green]  OK[/]", "warning": "[yellow]WARN[/]", "error": "[red]FAIL[/]"}


def doctor(
    config: Path | None, *, as_json: bool, backend: str | None = None, probe: str | None = None
) -> int:
    """Print the checks; the exit code is 0 unless one is an error."""
    checks = run_checks(config, backend, probe)
    failed = any(c.status == "error" for c in checks)
    code = EXIT_INCOMPLETE if failed else EXIT_OK
    if as_json:
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
        return code
    for c in checks:
        console.print(f"{_MARK[c.status]} {c.name}: {escape(c.message)}", highlight=False, soft_wrap=True)
        if c.hint and c.status != "ok":
            console.print(f"     [dim]→ {escape(c.hint)}[/]", highlight=False, soft_wrap=True)
    return code

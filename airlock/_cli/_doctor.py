"""``airlock doctor``: is this machine ready to run agents? One line per check."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from rich.markup import escape

from ._common import EXIT_INCOMPLETE, EXIT_OK, console

Status = Literal["ok", "warning", "error"]


@dataclass(frozen=True)
class Check:
    """The result of one check."""

    #: Short name (``docker``, ``image``, ``gvisor``, …).
    name: str
    status: Status
    #: What was found.
    message: str
    #: What to do about it (empty when ok).
    hint: str = ""


def check_docker() -> tuple[list[Check], Any]:
    """The engine answers (and its version); returns the client for the next checks, or None."""
    from airlock.images import docker_client

    try:
        client = docker_client(timeout=10)
        version = client.version()
    except Exception as e:
        return [
            Check(
                "docker",
                "error",
                f"Docker engine unreachable: {e}",
                "start Docker (dockerd) or set DOCKER_HOST; the docker backend needs it",
            )
        ], None
    return [
        Check(
            "docker",
            "ok",
            f"Docker engine {version.get('Version', '?')} reachable (API {version.get('ApiVersion', '?')})",
        )
    ], client


def check_image(client: Any) -> Check:
    """The runner image exists (and was built from these sources)."""
    from airlock.images import LABEL_DIGEST, checkout_digest, docker_errors, runner_image_tag

    tag = runner_image_tag()
    errors = docker_errors()
    try:
        image = client.images.get(tag)
    except errors.ImageNotFound:
        return Check("image", "error", f"runner image {tag} is missing", "run: airlock images build")
    except errors.DockerException as e:
        return Check("image", "error", f"cannot inspect {tag}: {e}", "check the Docker engine")
    size = (image.attrs.get("Size") or 0) / 1e6
    found = f"runner image {tag} present ({image.id[:19]}, {size:.0f} MB)"
    label = (image.attrs.get("Config") or {}).get("Labels") or {}
    current = checkout_digest()
    if current is not None and label.get(LABEL_DIGEST) not in (None, current):
        return Check(
            "image",
            "warning",
            found + ", but built from other sources than this checkout",
            "run: airlock images build",
        )
    return Check("image", "ok", found)


def check_runtimes(client: Any) -> list[Check]:
    """gVisor (runsc) and Kata runtimes, from ``docker info``; absent is a warning."""
    from airlock.sandbox.docker._config import GVISOR_RUNTIMES, KATA_RUNTIMES

    try:
        info = client.info()
    except Exception as e:
        return [Check("runtimes", "error", f"docker info failed: {e}", "check the Docker engine")]
    runtimes = set((info.get("Runtimes") or {}).keys())
    out = []
    gvisor = [r for r in GVISOR_RUNTIMES if r in runtimes]
    if gvisor:
        out.append(Check("gvisor", "ok", f"gvisor isolation available (runtime {gvisor[0]})"))
    else:
        out.append(
            Check(
                "gvisor",
                "warning",
                "gvisor isolation unavailable: install runsc",
                "install gVisor and register runsc in /etc/docker/daemon.json (agents asking for "
                "gvisor are refused, never downgraded)",
            )
        )
    kata = [r for r in KATA_RUNTIMES if r in runtimes]
    if kata:
        out.append(Check("kata", "ok", f"micro_vm isolation available (runtime {kata[0]})"))
    else:
        out.append(
            Check(
                "kata",
                "warning",
                "micro_vm isolation unavailable: install Kata Containers",
                "install kata-runtime and register it with Docker (agents asking for micro_vm are refused)",
            )
        )
    return out


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


def run_checks(config: Path | None) -> list[Check]:
    """Every check, in order (nothing is downloaded or started)."""
    checks, client = check_docker()
    if client is not None:
        checks.append(check_image(client))
        checks += check_runtimes(client)
        client.close()
    checks += check_local_model()
    checks.append(check_config(config))
    return checks


_MARK = {"ok": "[green]  OK[/]", "warning": "[yellow]WARN[/]", "error": "[red]FAIL[/]"}


def doctor(config: Path | None, *, as_json: bool) -> int:
    """Print the checks; the exit code is 0 unless one is an error."""
    checks = run_checks(config)
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

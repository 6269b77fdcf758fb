"""What every verb shares: the consoles, the exit codes, error → exit code, config loading."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from airlock.config import AgentConfig, AirlockConfig, InvalidConfigError, load_config
from airlock.errors import AirlockError, ConfigError, ImageError, RunnerError, SpecError
from layer0 import EnvError, ExitReason, Layer0Error, TurnError

#: The turn completed (or the command succeeded).
EXIT_OK = 0
#: The turn ended without completing (max_turns, budget, timeout, safety_stop, observer_halt,
#: circuit_breaker, custom); for ``doctor``: some check failed.
EXIT_INCOMPLETE = 1
#: Usage or configuration error (bad flags, invalid configuration, unknown agent, bad spec).
EXIT_USAGE = 2
#: The environment could not provide the sandbox (engine, image, isolation, credentials,
#: resources, local model server).
EXIT_ENV = 3
#: The turn itself failed (model, tool, runner), or an unexpected error.
EXIT_TURN = 4
#: Cancelled with Ctrl-C (the sandbox was removed first).
EXIT_CANCELLED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 complete; 1 ended without completing (max_turns, budget, timeout, safety_stop, "
    "observer_halt, circuit_breaker, custom); 2 usage or configuration error; 3 environment or "
    "provisioning error (Docker engine, image, isolation, credentials, local model); 4 the turn "
    "failed (model, tool, runner); 130 cancelled by Ctrl-C."
)

console = Console(log_path=False)
err_console = Console(stderr=True)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def exit_code_for_error(error: BaseException) -> int:
    """The exit code an error maps to (see :data:`EXIT_CODES_HELP`)."""
    from airlock.localmodel import LocalModelError

    if isinstance(error, ConfigError | SpecError):
        return EXIT_USAGE
    if isinstance(error, EnvError):
        return EXIT_TURN if error.kind == "turn_error" else EXIT_ENV
    if isinstance(error, ImageError | LocalModelError):
        return EXIT_ENV
    if isinstance(error, TurnError | RunnerError):
        return EXIT_TURN
    if isinstance(error, AirlockError | Layer0Error):
        return EXIT_ENV
    return EXIT_TURN


def exit_code_for_reason(reason: ExitReason) -> int:
    """0 for ``complete``, 4 for ``error``, 1 for every other way a turn can end."""
    if reason.kind == "complete":
        return EXIT_OK
    if reason.kind == "error":
        return EXIT_TURN
    return EXIT_INCOMPLETE


def describe_reason(reason: ExitReason) -> str:
    """``complete``, ``observer_halt (why)``, ``custom (name)``…"""
    detail = reason.reason or reason.custom_name
    return f"{reason.kind} ({detail})" if detail else reason.kind


def hint_for(error: BaseException) -> str | None:
    """A next step for well-known failures (None when the message says it all)."""
    text = str(error)
    if isinstance(error, EnvError) and "airlock images build" not in text and "image" in text.lower():
        return "build the runner image with: airlock images build"
    if isinstance(error, EnvError) and "Docker engine" in text:
        return "is Docker running? check with: airlock doctor"
    return None


def report_error(error: BaseException) -> NoReturn:
    """Print ``error`` (every issue of an InvalidConfigError on its own line) and exit."""
    code = exit_code_for_error(error)
    if isinstance(error, InvalidConfigError):
        err_console.print(
            f"[bold red]error:[/] invalid configuration ({len(error.issues)} problem(s)):", highlight=False
        )
        for issue in error.issues:
            err_console.print(f"  {escape(str(issue))}", highlight=False, soft_wrap=True)
        raise typer.Exit(code)
    kind = "" if isinstance(error, AirlockError | Layer0Error) else f"{type(error).__name__}: "
    hint = hint_for(error)
    err_console.print(f"[bold red]error:[/] {escape(kind + str(error))}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[yellow]hint:[/] {escape(hint)}", highlight=False)
    raise typer.Exit(code)


def load(config: Path | None) -> AirlockConfig:
    """The configuration (explicit path, ``$AIRLOCK_CONFIG``, ``./airlock.yaml``, ``./airlock.d/``).

    Exits with 2 and every problem as ``file:line:col: key: message`` when it is invalid.
    """
    try:
        return load_config(config)
    except AirlockError as e:
        report_error(e)


def load_agent(config: Path | None, name: str) -> tuple[AirlockConfig, AgentConfig]:
    """The configuration and its agent ``name`` (exit 2 listing the defined agents if unknown)."""
    cfg = load(config)
    try:
        return cfg, cfg.agent(name)
    except ConfigError as e:
        report_error(e)


@contextlib.contextmanager
def on_stop_signals(handler: Callable[[], None]) -> Iterator[None]:
    """Call ``handler`` on SIGINT/SIGTERM while inside (on the running loop), instead of
    raising KeyboardInterrupt; the previous handling is restored on exit."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, handler)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)

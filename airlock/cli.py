"""The ``airlock`` command. Only this module and ``airlock._cli`` import typer and rich.

Structure: one typer app with a sub-app per noun (``images``, ``agents``) and top-level verbs
(``run``, ``doctor``, ``gc``); the verbs' work lives in ``airlock._cli``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from airlock._cli._common import EXIT_CODES_HELP, console, err_console, load, load_agent
from airlock.errors import AirlockError
from layer0 import Layer0Error

app = typer.Typer(
    name="airlock",
    help="airlock: run LLM agents inside real sandboxes.",
    no_args_is_help=True,
    add_completion=False,
)
images_app = typer.Typer(help="Build and inspect sandbox images.", no_args_is_help=True)
app.add_typer(images_app, name="images")
agents_app = typer.Typer(help="List and inspect the configured agents.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Configuration file or directory (default: $AIRLOCK_CONFIG, ./airlock.yaml, ./airlock.d/).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


@app.command(
    "run",
    help="Run AGENT once on MESSAGE in a fresh sandbox, with live progress, then print the answer "
    "and a summary.\n\n" + EXIT_CODES_HELP,
)
def run(
    agent: Annotated[str, typer.Argument(help="The agent's name (see: airlock agents ls).")],
    message: Annotated[str, typer.Argument(help="The user message for the turn.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
    session: Annotated[str | None, typer.Option("--session", help="Session id for the turn.")] = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", min=1, help="Override the agent's max_turns.")
    ] = None,
    max_cost: Annotated[
        str | None, typer.Option("--max-cost", help="Override the agent's max_cost (USD, e.g. 0.50).")
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option("--timeout", help="Override the agent's max_duration (90s, 5m, 1h30m, or ms)."),
    ] = None,
) -> None:
    """Run one job (see the command help for the exit codes)."""
    from airlock._cli._common import EXIT_CANCELLED
    from airlock._cli._run import RunOptions, run_agent

    try:
        _, agent_config = load_agent(config, agent)
        opts = RunOptions(
            message=message,
            session=session,
            max_turns=max_turns,
            max_cost=max_cost,
            timeout=timeout,
            as_json=as_json,
        )
        run_agent(agent_config, opts)
    except KeyboardInterrupt:  # before or after the job's event loop (the job handles its own)
        err_console.print("[yellow]cancelled[/]")
        raise typer.Exit(EXIT_CANCELLED) from None


@agents_app.command("ls")
def agents_ls(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List the agents: backend, provider/model, tools, network, credentials, resources."""
    from airlock._cli._agents import agents_ls as list_agents

    list_agents(load(config), as_json=as_json)


@agents_app.command("show")
def agents_show(
    agent: Annotated[str, typer.Argument(help="The agent's name.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show an agent's effective sandbox policy: spec, isolation, egress, credentials, limits."""
    from airlock._cli._agents import agents_show as show_agent

    _, agent_config = load_agent(config, agent)
    show_agent(agent_config, as_json=as_json)


@app.command("doctor")
def doctor(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Check this machine: Docker engine, runner image, gvisor/kata runtimes, local model, config.

    Exit code 0 when no check is an error (warnings are fine), 1 otherwise.
    """
    from airlock._cli._doctor import doctor as run_doctor

    raise typer.Exit(run_doctor(config, as_json=as_json))


@images_app.command("build")
def images_build(
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even if current; refresh the cached wheels.")
    ] = False,
    source: Annotated[
        Path | None, typer.Option("--source", help="The airlock source tree (default: this checkout).")
    ] = None,
) -> None:
    """Build the runner image offline (Debian packages + wheels; no registry). Needs root."""
    from airlock.controller import build_runner_image

    try:
        with console.status("building the runner image", spinner="dots") as status:

            def step(message: str) -> None:
                status.update(message)
                console.log(message)

            report = asyncio.run(build_runner_image(force=force, source=source, on_step=step))
    except (AirlockError, Layer0Error) as e:
        raise _fail(str(e)) from e
    if report.skipped:
        console.print(
            f"[green]{report.tag}[/] is up to date ({report.image_id[:19]}, "
            f"{report.size_bytes / 1e6:.0f} MB); use --force to rebuild"
        )
        return
    table = Table(title=f"built {report.tag}", show_header=True)
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for name, seconds in report.steps:
        table.add_row(name, f"{seconds:.1f}")
    table.add_row("[bold]total[/]", f"[bold]{report.seconds:.1f}[/]")
    console.print(table)
    console.print(f"image {report.image_id[:19]}, {report.size_bytes / 1e6:.0f} MB")
    if report.removed_previous:
        console.print(f"removed the previous image {report.removed_previous[:19]}")


@app.command("gc")
def gc(
    all_: Annotated[
        bool,
        typer.Option("--all", help="Also remove sandboxes whose owner is still running."),
    ] = False,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Control directories' parent.")
    ] = None,
) -> None:
    """Remove orphaned sandboxes: containers, networks and control dirs whose owner is gone."""
    from airlock.controller import reap_orphans
    from airlock.controller._dockerapi import docker_client

    try:
        client = docker_client()
    except Layer0Error as e:
        raise _fail(str(e)) from e
    report = reap_orphans(client, state_dir, include_live=all_)
    for kind, items in (
        ("container", report.containers),
        ("network", report.networks),
        ("directory", report.directories),
    ):
        for item in items:
            console.print(f"removed {kind} {item}")
    if not report.removed:
        console.print("nothing to remove")
    for problem in report.errors:
        err_console.print(f"[yellow]warning:[/] {problem}")
    if report.errors:
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``airlock`` console script."""
    app()


if __name__ == "__main__":
    main()

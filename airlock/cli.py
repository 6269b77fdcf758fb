"""The ``airlock`` command. The only module that imports typer and rich.

Structure: one typer app with a sub-app per noun (``images``) and top-level verbs (``gc``);
later commands (``run``, ``agents``, ``doctor``) register the same way.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

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

console = Console(log_path=False)
err_console = Console(stderr=True)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


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

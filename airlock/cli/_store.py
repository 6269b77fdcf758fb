"""``airlock store``: copy the controller's job store, and put a copy back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ._common import console, err_console

__all__ = ["store_app"]

store_app = typer.Typer(
    help="Back up the controller's job store, or restore a copy (e.g. to roll back an upgrade).",
    no_args_is_help=True,
)

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="The controller's data dir (default: $AIRLOCK_DATA_DIR, else "
        "$XDG_STATE_HOME/airlock/controller or ~/.local/state/airlock/controller).",
    ),
]


def _data_dir(given: Path | None) -> Path:
    from airlock.jobs import default_data_dir

    return (given or default_data_dir()).absolute()


@store_app.command("backup")
def backup(
    target: Annotated[
        Path | None, typer.Argument(help="Where to write the copy (default: beside the store).")
    ] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Copy the job store consistently (safe while the controller runs); the copy is private (0600)."""
    from airlock.controller import backup_store

    try:
        made = backup_store(_data_dir(data_dir), target)
    except (ValueError, OSError) as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(1) from None
    console.print(f"backed up to {escape(str(made))}")


@store_app.command("ls")
def ls(data_dir: DataDirOption = None) -> None:
    """The copies beside the store (made before each schema upgrade, or by `store backup`), newest first."""
    from airlock.controller import backups

    store = _data_dir(data_dir) / "jobs.db"
    for found in backups(store):
        when = found.made_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        console.print(f"{escape(found.path.name)}  schema v{found.version}  {when}")


@store_app.command("restore")
def restore(
    backup: Annotated[Path, typer.Argument(help="The copy: a path, or a name listed by `airlock store ls`.")],
    data_dir: DataDirOption = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Do not ask: jobs recorded since the copy are lost.")
    ] = False,
) -> None:
    """Replace the job store by a copy (stop the controller first). The replaced store is kept
    beside it as jobs.db.replaced-TIME; jobs recorded after the copy are not in it."""
    from airlock.controller import restore_store

    chosen = _data_dir(data_dir)
    if not yes and not typer.confirm(
        f"Replace the job store in {chosen} by {backup}? Jobs recorded since that copy are lost"
    ):
        raise typer.Exit(1)
    try:
        kept = restore_store(chosen, backup)
    except (ValueError, OSError) as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(1) from None
    console.print(f"restored {escape(str(backup))}; the replaced store is kept at {escape(str(kept))}")

"""``airlock store``: copy the controller's job store, and put a copy back (SQLite files in the
data dir; or, with ``--store``, every airlock table of a PostgreSQL database, as one SQLite file)."""

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

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="AIRLOCK_STORE",
        show_default=False,
        help="The replicas' PostgreSQL database (postgresql://user:password@host:port/db): its jobs, "
        "state and API keys, as one SQLite file. Prefer the environment variable: a password on "
        "the command line is visible to other users.",
    ),
]


def _fail(error: Exception) -> typer.Exit:
    err_console.print(f"[red]error:[/] {escape(str(error))}")
    return typer.Exit(1)


def _postgres(store: str) -> str:
    from airlock.state import is_postgres_dsn, redacted

    if not is_postgres_dsn(store):
        raise _fail(ValueError(f"--store {redacted(store)!r} is not a PostgreSQL URI (postgresql://…)"))
    return store


def _data_dir(given: Path | None) -> Path:
    from airlock.jobs import default_data_dir

    return (given or default_data_dir()).absolute()


@store_app.command("backup")
def backup(
    target: Annotated[
        Path | None, typer.Argument(help="Where to write the copy (default: beside the store).")
    ] = None,
    data_dir: DataDirOption = None,
    store: StoreOption = None,
) -> None:
    """Copy the job store consistently (safe while the controller runs); the copy is private (0600).
    With --store, every airlock table of the PostgreSQL database, as one SQLite file (default:
    airlock-store-TIME.bak here)."""
    import asyncio

    from airlock.controller import backup_postgres_store, backup_store
    from airlock.state import DatabaseError

    try:
        if store is not None:
            made = asyncio.run(backup_postgres_store(_postgres(store), target))
        else:
            made = backup_store(_data_dir(data_dir), target)
    except (ValueError, OSError, DatabaseError) as e:
        raise _fail(e) from None
    console.print(f"backed up to {escape(str(made))}")


@store_app.command("ls")
def ls(data_dir: DataDirOption = None) -> None:
    """The copies beside the store (made before each schema upgrade, or by `store backup`), newest first."""
    from airlock.controller import backups

    store = _data_dir(data_dir) / "jobs.db"
    for found in backups(store):
        when = found.made_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        console.print(f"{escape(found.path.name)}  schema v{found.version}  {when}")


@store_app.command("usage")
def usage(data_dir: DataDirOption = None, store: StoreOption = None) -> None:
    """Workspace snapshots' storage: bytes stored by tenant (each file's content once), and the
    bytes the snapshots of each agent's jobs and sandboxes name. Reads the store directly (no
    controller needed)."""
    import asyncio

    from airlock.controller import JobStoreError
    from airlock.state import DatabaseError

    path = _data_dir(data_dir) / "jobs.db"
    if store is None and not path.is_file():
        raise _fail(ValueError(f"no job store at {path}"))
    try:
        lines = asyncio.run(_usage(_postgres(store) if store is not None else None, path))
    except (OSError, DatabaseError, JobStoreError) as e:
        raise _fail(e) from None
    for line in lines:
        console.print(escape(line))


async def _usage(dsn: str | None, path: Path) -> list[str]:
    from airlock.controller import PostgresJobStore, SqliteJobStore
    from airlock.state import PostgresDatabase

    if dsn is None:
        async with SqliteJobStore(path) as jobs:
            found = await jobs.workspace_usage()
    else:
        async with PostgresDatabase(dsn) as db, PostgresJobStore(db) as pg:
            found = await pg.workspace_usage()
    lines = [f"{'tenant':<16} {'blobs':>6} {'stored':>11} {'plain':>11}"]
    lines += [
        f"{t.tenant:<16} {t.blobs:>6} {_size(t.stored):>11} {_size(t.plain):>11}" for t in found.tenants
    ]
    lines += [
        "",
        f"{'tenant':<16} {'agent':<16} {'manifests':>9} {'blobs':>6} {'referenced':>11} {'stored':>11}",
    ]
    for a in found.agents:
        sizes = f"{_size(a.plain):>11} {_size(a.stored):>11}"
        lines.append(f"{a.tenant:<16} {a.agent:<16} {a.manifests:>9} {a.blobs:>6} {sizes}")
    return lines


def _size(n: int) -> str:
    """Bytes, in the largest binary unit that keeps the number at least 1."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


@store_app.command("restore")
def restore(
    backup: Annotated[Path, typer.Argument(help="The copy: a path, or a name listed by `airlock store ls`.")],
    data_dir: DataDirOption = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Do not ask: jobs recorded since the copy are lost.")
    ] = False,
    store: StoreOption = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="With --store: replace the records the database holds (they are first copied "
            "beside the backup, as FILE.replaced-TIME).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="With --store: restore even though a replica's heartbeat is recent."),
    ] = False,
) -> None:
    """Replace the job store by a copy (stop the controller first). The replaced store is kept
    beside it as jobs.db.replaced-TIME; jobs recorded after the copy are not in it. With
    --store: load a copy made by `airlock store backup --store` into the PostgreSQL database
    (every replica stopped), which must hold no records unless --replace."""
    from airlock.controller import restore_store

    if store is not None:
        _restore_postgres(_postgres(store), backup, replace=replace, force=force, yes=yes)
        return
    chosen = _data_dir(data_dir)
    if not yes and not typer.confirm(
        f"Replace the job store in {chosen} by {backup}? Jobs recorded since that copy are lost"
    ):
        raise typer.Exit(1)
    try:
        kept = restore_store(chosen, backup)
    except (ValueError, OSError) as e:
        raise _fail(e) from None
    console.print(f"restored {escape(str(backup))}; the replaced store is kept at {escape(str(kept))}")


def _restore_postgres(dsn: str, backup: Path, *, replace: bool, force: bool, yes: bool) -> None:
    import asyncio

    from airlock.controller import restore_postgres_store
    from airlock.state import DatabaseError, redacted

    if (
        replace
        and not yes
        and not typer.confirm(
            f"Replace the records in {redacted(dsn)} by {backup}? Jobs recorded since that copy are lost"
        )
    ):
        raise typer.Exit(1)
    try:
        kept = asyncio.run(restore_postgres_store(dsn, backup, replace=replace, force=force))
    except ValueError as e:
        hint = "" if force or "still running" not in str(e) else " (or --force)"
        raise _fail(ValueError(f"{e}{hint}")) from None
    except DatabaseError as e:
        hint = "; pass --replace to do so" if "holds records" in str(e) else ""
        raise _fail(ValueError(f"{e}{hint}")) from None
    except OSError as e:
        raise _fail(e) from None
    done = f"restored {escape(str(backup))} into {escape(redacted(dsn))}"
    console.print(done + (f"; the replaced records are kept at {escape(str(kept))}" if kept else ""))

"""``airlock jobs prune``: remove finished jobs now (administrators), or count them (dry run)."""

from __future__ import annotations

import json

from rich.table import Table

from airlock.jobs import ControllerClient, PruneSummary

from ._common import console
from ._jobs import Target, _with_client


def _size(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def prune(
    target: Target, *, older_than_s: float | None, tenant: str | None, dry_run: bool, as_json: bool
) -> None:
    """Prune (or count) the finished jobs due, and show what went (or would go)."""

    async def work(client: ControllerClient) -> PruneSummary:
        return await client.prune(older_than_s=older_than_s, tenant=tenant, dry_run=dry_run)

    summary = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps(summary.model_dump()))
        return
    verb = "would remove" if dry_run else "removed"
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
    table.add_column(verb)
    table.add_column("count", justify="right")
    rows = [
        ("job trees", str(summary.trees)),
        ("jobs", str(summary.jobs)),
        ("events", str(summary.events)),
        ("files", str(summary.files)),
        ("bytes", _size(summary.bytes)),
        ("checkpoints", str(summary.checkpoints)),
        ("signals", str(summary.signals)),
    ]
    for name, count in rows:
        table.add_row(name, count)
    console.print(table)
    if summary.more:
        console.print("[dim]more jobs are due than one dry-run batch counts[/dim]")

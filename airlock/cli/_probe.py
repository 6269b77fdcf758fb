"""``airlock probe``: the isolation probe the Helm chart's ``helm test`` pod runs.

It prints one row per check and exits 0 when isolation holds, 1 on any hole, 2 on bad
arguments or missing probe agents, 3 when the controller or a job fails. The canary and the
token are never printed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from airlock.probe.client import ProbeError, ProbeOptions, Row, read_secret_file, render_rows, run_probe

from ._common import EXIT_INCOMPLETE, EXIT_OK, console, err_console

_STYLE = {"PASS": "green", "FAIL": "bold red", "NOT CHECKED": "yellow"}


def parse_targets(values: list[str]) -> dict[str, str]:
    """``NAME=HOST:PORT`` options as a mapping.

    Raises:
        ProbeError: one is malformed or a name repeats (exit 2).
    """
    targets: dict[str, str] = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or ":" not in target:
            raise ProbeError(f"--target {value!r} is not NAME=HOST:PORT", 2)
        if name in targets:
            raise ProbeError(f"--target {name} is given twice", 2)
        targets[name] = target
    return targets


def probe(opts: ProbeOptions, *, as_json: bool, serve_config: Path | None = None) -> int:
    """Run the probe (against a controller it serves itself with ``serve_config``) and print
    its verdict; the exit code."""
    try:
        if serve_config is not None:
            from airlock.probe.served import run_served_probe

            rows = asyncio.run(run_served_probe(opts, serve_config))
        else:
            rows = asyncio.run(run_probe(opts))
    except ProbeError as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}")
        return e.exit_code
    holds = all(r.passed is not False for r in rows)
    if as_json:
        print(render_rows(rows))
    else:
        _table(rows)
        verdict = "isolation holds" if holds else "ISOLATION BROKEN: a FAIL row above is reachable or visible"
        console.print(f"[{'green' if holds else 'bold red'}]{verdict}[/]")
    return EXIT_OK if holds else EXIT_INCOMPLETE


def _table(rows: list[Row]) -> None:
    table = Table(title="airlock isolation probe", show_lines=False)
    for column in ("agent", "check", "expected", "observed", "result"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.agent, r.check, r.expected, escape(r.observed), f"[{_STYLE[r.mark]}]{r.mark}[/]")
    console.print(table)


def read_inputs(
    controller: str | None, token_file: Path | None, serve_config: Path | None, canary_file: Path
) -> tuple[str, str]:
    """The token (none when the probe serves its own controller) and the canary from their
    mounted files.

    Raises:
        ProbeError: exit 2: not exactly one of --controller and --serve-config, a controller
            without its token file, or an unusable file.
    """
    if (controller is None) == (serve_config is None):
        raise ProbeError("give --serve-config (the probe serves its agents) or --controller, not both", 2)
    if controller is not None and token_file is None:
        raise ProbeError("--controller needs --token-file (its bearer token)", 2)
    token = read_secret_file(token_file, "token") if token_file is not None else ""
    return token, read_secret_file(canary_file, "canary")

"""``airlock status``: what a running controller proved about its backends' isolation."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

from airlock.jobs import ControllerClient
from airlock.sandbox import IsolationProof

from ._jobs import Target, _with_client

__all__ = ["controller_status"]

_STYLE = {"enforced": "green", "assumed": "yellow", "failed": "red", "unproven": "red"}


def _dump(proof: IsolationProof) -> dict[str, object]:
    return {
        "backend": proof.backend,
        "scope": proof.scope,
        "status": proof.status,
        "checked_at": proof.checked_at.isoformat(),
        "reason": proof.reason,
        "evidence": list(proof.evidence),
        "allows_jobs": proof.allows_jobs,
    }


def controller_status(target: Target, as_json: bool) -> None:
    """Print each proof; exit 1 when one refuses jobs (failed or unproven)."""

    async def work(client: ControllerClient) -> list[IsolationProof]:
        return await client.status()

    proofs = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"isolation": [_dump(p) for p in proofs]}))
    else:
        console = Console(highlight=False, soft_wrap=True)
        if not proofs:
            console.print("no backend of this controller's agents proves its isolation before use")
        for p in proofs:
            when = p.checked_at.strftime("%Y-%m-%d %H:%M:%S UTC")
            style = _STYLE[p.status]
            where = f"{escape(p.backend)} {escape(p.scope)}"
            console.print(f"{where}: [{style}]{p.status}[/{style}] at {when}: {escape(p.reason)}")
            for line in p.evidence:
                console.print(f"  {escape(line)}")
    if not all(p.allows_jobs for p in proofs):
        raise typer.Exit(1)

"""The probe's run: serve the destinations, submit the two jobs, judge what comes back.

The allow-list job goes first: its sandbox listens on :data:`LISTEN_PORT` and stays up until
the probe says ``done``, so the deny-all job can be pointed at it (and at its proxy pod) as
"another sandbox". Every hostname is resolved here: sandboxes have no DNS.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from airlock.jobs import ControllerClient, JobState
from airlock.sandbox.kubernetes import CREDENTIAL_PORT_BASE, EGRESS_PORT, RUNNER_PORT, sandbox_addresses

from ._servers import ProbeServers
from ._verdict import Row, canary_rows, http_row, render_rows, report_of, tcp_rows

__all__ = [
    "LISTEN_PORT",
    "ProbeError",
    "ProbeOptions",
    "ProbeServers",
    "Row",
    "read_secret_file",
    "render_rows",
    "report_of",
    "run_probe",
]

#: Where the allow-list sandbox listens for the deny-all one.
LISTEN_PORT = 7070
#: The sandbox-side program (the runner image has airlock in this venv).
SANDBOX_PROGRAM = ("/opt/venv/bin/python", "-m", "airlock.probe.sandbox")


class ProbeError(Exception):
    """The probe could not run (bad input, controller unreachable, a job that did not finish)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ProbeOptions:
    """What ``airlock probe`` was asked for."""

    controller: str
    token: str
    deny_agent: str
    allow_agent: str
    allowed_url: str
    canary: str
    canary_header: str
    self_ip: str
    allowed_port: int = 8080
    forbidden_port: int = 8081
    targets: dict[str, str] = field(default_factory=dict)
    sandbox_namespace: str | None = None
    timeout_s: float = 300.0


def resolve(target: str) -> str:
    """``host:port`` with the host resolved to an IP literal (bracketed for IPv6).

    Raises:
        ProbeError: the name does not resolve (exit 2).
    """
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ProbeError(f"target {target!r} is not host:port", 2)
    try:
        ip = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)[0][4][0]
    except OSError as e:
        raise ProbeError(f"cannot resolve {host}: {e}", 2) from e
    return f"[{ip}]:{port}" if ":" in str(ip) else f"{ip}:{port}"


def command(spec: Mapping[str, object]) -> str:
    """The job's message: the sandbox program with its input."""
    return shlex.join([*SANDBOX_PROGRAM, json.dumps(spec, separators=(",", ":"))])


async def run_probe(opts: ProbeOptions) -> list[Row]:
    """Run both jobs and return every check.

    Raises:
        ProbeError: see its exit codes (2 input, 3 controller or job).
    """
    targets = {name: await asyncio.to_thread(resolve, t) for name, t in opts.targets.items()}
    digest = hashlib.sha256(opts.canary.encode()).hexdigest()
    forbidden = {
        "probe pod outside the allow-list": f"{opts.self_ip}:{opts.forbidden_port}",
        "allowed server, bypassing the proxy": f"{opts.self_ip}:{opts.allowed_port}",
    }
    forbidden_url = f"http://{opts.self_ip}:{opts.forbidden_port}/"
    with ProbeServers(opts.allowed_port, opts.forbidden_port) as servers:
        async with ControllerClient(opts.controller, opts.token) as client:
            await _check_agents(client, opts)
            started = datetime.now(UTC)
            allow_spec = {
                "tcp": {**targets, **forbidden},
                "http": {"allowed": opts.allowed_url, "forbidden": forbidden_url},
                "credential": {"port": CREDENTIAL_PORT_BASE, "path": "/echo"},
                "canary_sha256": digest,
                "listen": LISTEN_PORT,
                "hold_until": opts.allowed_url.rstrip("/") + "/done",
                "hold_seconds": opts.timeout_s,
            }
            allow = await client.submit(opts.allow_agent, command(allow_spec))
            others, other_rows = await _other_sandbox(opts, started)
            deny_spec = {
                "tcp": {**targets, **forbidden, **others},
                "http": {"allowed": opts.allowed_url},
                "canary_sha256": digest,
            }
            try:
                deny = await client.submit(opts.deny_agent, command(deny_spec))
                deny_text = await _answer(client, deny.id, opts)
            finally:  # the allow-list sandbox stops holding, whatever happened
                servers.done.set()
            allow_text = await _answer(client, allow.id, opts)
    try:
        deny_report, allow_report = report_of(deny_text), report_of(allow_text)
    except ValueError as e:
        raise ProbeError(str(e), 3) from e
    rows = tcp_rows(opts.deny_agent, deny_report, {**targets, **forbidden, **others})
    rows.append(http_row(opts.deny_agent, deny_report, "allowed", opts.allowed_url, allowed=False))
    rows += canary_rows(opts.deny_agent, deny_report)
    rows += other_rows
    rows += tcp_rows(opts.allow_agent, allow_report, {**targets, **forbidden})
    rows.append(http_row(opts.allow_agent, allow_report, "allowed", opts.allowed_url, allowed=True))
    rows.append(http_row(opts.allow_agent, allow_report, "forbidden", forbidden_url, allowed=False))
    rows += canary_rows(opts.allow_agent, allow_report)
    injected = servers.received(opts.canary_header, opts.canary)
    delivered = "injected" if injected else f"not received ({allow_report.get('credential')})"
    rows.append(Row(opts.allow_agent, "sidecar secret reaches the upstream", "injected", delivered, injected))
    peers = allow_report.get("listener_peers") or []
    listener = f"its listener :{LISTEN_PORT} reached by another sandbox"
    rows.append(Row(opts.allow_agent, listener, "no peer", ", ".join(peers) or "no peer", not peers))
    seen = servers.forbidden_connections
    outside = f"probe pod :{opts.forbidden_port} (outside the allow-list) connected to"
    rows.append(
        Row("any", outside, "never", f"{len(seen)} connection(s) {', '.join(seen)}".strip(), not seen)
    )
    return rows


async def _check_agents(client: ControllerClient, opts: ProbeOptions) -> None:
    try:
        names = {str(a.get("name")) for a in await client.agents()}
    except Exception as e:
        raise ProbeError(f"the controller at {opts.controller} does not answer: {e}", 3) from e
    missing = [a for a in (opts.deny_agent, opts.allow_agent) if a not in names]
    if missing:
        raise ProbeError(f"the controller has no agent {', '.join(missing)} (isolationTest.enabled?)", 2)


async def _other_sandbox(opts: ProbeOptions, since: datetime) -> tuple[dict[str, str], list[Row]]:
    """The allow-list job's sandbox and proxy pods, as targets for the deny-all job."""
    what = "another sandbox (the allow-list job's pods)"
    if opts.sandbox_namespace is None:
        return {}, [Row(opts.deny_agent, what, "unreachable", "no --sandbox-namespace: not checked", None)]
    deadline = asyncio.get_running_loop().time() + opts.timeout_s
    while asyncio.get_running_loop().time() < deadline:
        found = [
            a
            for a in await sandbox_addresses(opts.sandbox_namespace)
            if a.created >= since.replace(microsecond=0)
        ]
        sandbox = next((a for a in found if a.role == "sandbox"), None)
        if sandbox is not None:
            proxy = next((a for a in found if a.role == "proxy" and a.sandbox_id == sandbox.sandbox_id), None)
            targets = {
                "other sandbox's listener": f"{_host(sandbox.ip)}:{LISTEN_PORT}",
                "other sandbox's runner": f"{_host(sandbox.ip)}:{RUNNER_PORT}",
            }
            if proxy is not None:
                targets["other sandbox's proxy"] = f"{_host(proxy.ip)}:{EGRESS_PORT}"
            return targets, []
        await asyncio.sleep(1.0)
    raise ProbeError(f"the allow-list job's sandbox pod never ran in {opts.sandbox_namespace}", 3)


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


async def _answer(client: ControllerClient, job_id: str, opts: ProbeOptions) -> str:
    try:
        job = await asyncio.wait_for(client.wait(job_id), opts.timeout_s)
    except TimeoutError as e:
        raise ProbeError(f"job {job_id} did not finish within {opts.timeout_s:.0f} s", 3) from e
    if job.state != JobState.SUCCEEDED or job.output is None:
        raise ProbeError(f"job {job_id} ({job.agent}) ended {job.state}: {job.error}", 3)
    return str(job.output.message.as_text())


def read_secret_file(path: Path, what: str) -> str:
    """A mounted secret's value (stripped).

    Raises:
        ProbeError: missing, unreadable or empty (exit 2).
    """
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ProbeError(f"cannot read the {what} file {path}: {e.strerror or e}", 2) from e
    if not value:
        raise ProbeError(f"the {what} file {path} is empty", 2)
    return value

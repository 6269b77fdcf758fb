"""Judging what the probe's sandboxes report: one row per check, PASS or FAIL."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Row:
    """One check: which agent, what was tried, what must happen, what did, and the outcome."""

    agent: str
    check: str
    expected: str
    observed: str
    passed: bool | None  # None: not checked (and why is in ``observed``)

    @property
    def mark(self) -> str:
        return "PASS" if self.passed else ("NOT CHECKED" if self.passed is None else "FAIL")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "result": self.mark}


def report_of(text: str) -> dict[str, Any]:
    """The sandbox's JSON report in a job's answer: the bash tool's result (``exit_code``,
    ``stdout``, ``stderr`` as JSON) or plain output around it.

    Raises:
        ValueError: the answer holds no report.
    """
    try:
        envelope = json.loads(text)
    except ValueError:
        envelope = None
    if isinstance(envelope, dict) and isinstance(envelope.get("stdout"), str):
        if envelope.get("exit_code") not in (0, None):
            raise ValueError(
                f"the probe program failed ({envelope.get('exit_code')}): {envelope.get('stderr')!r}"
            )
        text = envelope["stdout"]
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError(f"no probe report in the job's answer: {text[-500:]!r}")


def tcp_rows(agent: str, report: dict[str, Any], targets: dict[str, str]) -> list[Row]:
    """Every forbidden TCP destination must not connect."""
    rows = []
    for name, target in targets.items():
        observed = str((report.get("tcp") or {}).get(name, "not tried"))
        rows.append(
            Row(
                agent,
                f"tcp {name} {target}",
                "unreachable",
                observed,
                observed not in ("reachable", "not tried"),
            )
        )
    return rows


def http_row(agent: str, report: dict[str, Any], name: str, url: str, *, allowed: bool) -> Row:
    """An HTTP request through the egress proxy: answered 200 when allowed, never 200 when not."""
    answer = (report.get("http") or {}).get(name) or {}
    status = int(answer.get("status") or 0)
    observed = f"{status}" + (f" ({answer['error']})" if answer.get("error") else "")
    expected = "200 through the proxy" if allowed else "refused"
    return Row(agent, f"http {name} {url}", expected, observed, (status == 200) == allowed)


def canary_rows(agent: str, report: dict[str, Any]) -> list[Row]:
    """The sidecar secret must appear nowhere the sandbox can read."""
    places = report.get("canary_found_in")
    if places is None:
        return [Row(agent, "sidecar secret visible in the sandbox", "nowhere", "not scanned", False)]
    observed = ", ".join(places) if places else "nowhere"
    return [Row(agent, "sidecar secret visible in the sandbox", "nowhere", observed, not places)]


def render_rows(rows: list[Row]) -> str:
    """The rows as JSON (``--json``)."""
    return json.dumps(
        {"holds": all(r.passed is not False for r in rows), "checks": [r.as_dict() for r in rows]}
    )

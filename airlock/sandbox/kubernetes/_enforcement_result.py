"""What an enforcement proof found: :class:`EnforcementResult`, kept, annotated and shown.

A result is ``enforced`` only when the control pod reached the canary (the canary listens and
the pod network carries what a policy allows) and the prober, shaped like a deny-all sandbox,
reached none of its targets. ``failed`` names each target the prober reached; ``unproven``
says why nothing could be concluded (a pod that did not start, a control pod that could not
reach the canary, an unreadable answer). ``assumed`` is the operator's explicit opt-out
(``network_policy: assume_enforced``): no proof was made.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from .._proof import IsolationProof, IsolationStatus

__all__ = [
    "ANNOTATION",
    "EnforcementCheck",
    "EnforcementResult",
    "EnforcementStatus",
    "Expectation",
    "Outcome",
    "ReachingPod",
    "isolation_proof",
    "judge",
]

#: The sandbox namespace's annotation holding the latest result (JSON).
ANNOTATION = "airlock.dev/network-policy-enforcement"
EnforcementStatus = IsolationStatus
Outcome = Literal["connected", "refused", "timeout", "error", "resolved", "unresolved", "not run"]
ReachingPod = Literal["prober", "control", "resolver"]
Expectation = Literal["blocked", "reachable", "resolves"]


class EnforcementCheck(BaseModel):
    """One attempt of the proof: who tried what, what was expected, what happened."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``prober`` (a deny-all sandbox), ``control`` (allowed to reach the canary) or
    #: ``resolver`` (a proxy pod's DNS: it must resolve an in-cluster name).
    pod: ReachingPod
    #: What was tried (``canary``, ``cloud metadata``, ``api server``, ``controller``,
    #: ``cluster dns``).
    target: str
    address: str
    expect: Expectation
    outcome: Outcome
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Whether the outcome is the expected one (an attempt that ran and did not connect is
        blocked; one that did not run proves nothing)."""
        if self.outcome == "not run":
            return False
        if self.expect == "resolves":
            return self.outcome == "resolved"
        return (self.outcome == "connected") == (self.expect == "reachable")

    def line(self) -> str:
        """One line for doctor and logs."""
        verdict = "ok" if self.passed else "FAILED"
        extra = f" ({self.detail})" if self.detail else ""
        tried = f"{self.pod} → {self.target} {self.address}"
        return f"{tried}: {self.outcome}, expected {self.expect}: {verdict}{extra}"


class EnforcementResult(BaseModel):
    """The latest proof for one sandbox namespace (or the operator's opt-out)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: EnforcementStatus
    namespace: str
    checked_at: datetime
    #: One line: what the status rests on.
    reason: str
    checks: tuple[EnforcementCheck, ...] = ()

    @property
    def allows_jobs(self) -> bool:
        """Whether jobs may run on it: proven, or explicitly assumed."""
        return self.status in ("enforced", "assumed")

    @property
    def dns_resolves(self) -> bool | None:
        """Whether a proxy-shaped pod resolved an in-cluster name (None: not tried)."""
        tried = [c for c in self.checks if c.pod == "resolver"]
        return all(c.passed for c in tried) if tried else None

    def failed_checks(self) -> list[EnforcementCheck]:
        """The checks whose outcome was not the expected one."""
        return [c for c in self.checks if not c.passed]

    def age_s(self, now: datetime | None = None) -> float:
        """Seconds since the proof."""
        return ((now or datetime.now(UTC)) - self.checked_at).total_seconds()

    def summary(self) -> str:
        """The status, when, and what it rests on."""
        when = self.checked_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{self.status} in {self.namespace!r} at {when}: {self.reason}"

    def evidence(self) -> str:
        """Every check, one per line."""
        return "\n".join(c.line() for c in self.checks)

    def annotation(self) -> str:
        """The result as the namespace annotation holds it."""
        return self.model_dump_json()

    @classmethod
    def from_annotation(cls, text: str) -> EnforcementResult | None:
        """The result an annotation holds (None when it is not one)."""
        try:
            return cls.model_validate(json.loads(text))
        except (ValueError, ValidationError):
            return None


def judge(namespace: str, checks: list[EnforcementCheck], at: datetime) -> EnforcementResult:
    """The status the checks prove: the failed ones named, or why nothing is proven. The
    resolver's check never changes the status (a cluster whose DNS a proxy cannot reach is
    still isolated); a failed one is said in the reason, with what it breaks."""
    result = _judge_isolation(namespace, [c for c in checks if c.pod != "resolver"], at)
    dns = [c for c in checks if c.pod == "resolver"]
    failed = [c for c in dns if not c.passed]
    reason = result.reason
    if failed:
        reason += "; " + "; ".join(
            f"a proxy-shaped pod could not resolve {c.address} ({c.outcome}"
            + (f": {c.detail}" if c.detail else "")
            + "): agents with name rules cannot resolve them (backends.kubernetes.dns)"
            for c in failed
        )
    elif dns:
        reason += "; a proxy-shaped pod resolved " + ", ".join(c.address for c in dns)
    return result.model_copy(update={"reason": reason, "checks": tuple(checks)})


def _judge_isolation(namespace: str, checks: list[EnforcementCheck], at: datetime) -> EnforcementResult:
    """The status the prober's and the control pod's checks prove."""
    control = [c for c in checks if c.pod == "control"]
    reached = [c for c in checks if c.pod == "prober" and c.outcome == "connected"]
    if reached:
        named = ", ".join(f"{c.target} {c.address}" for c in reached)
        reason = f"a pod with a deny-all sandbox's policy reached {named}: NetworkPolicy is not enforced"
        return EnforcementResult(
            status="failed", namespace=namespace, checked_at=at, reason=reason, checks=tuple(checks)
        )
    unproven = [c for c in checks if not c.passed]
    if not control or unproven:
        reason = "nothing is proven: " + "; ".join(
            f"{c.pod} → {c.target}: {c.outcome}" for c in unproven or checks
        )
        if any(c.pod == "control" for c in unproven):
            reason += " (the control pod must reach the canary: a blocked prober alone proves nothing)"
        return EnforcementResult(
            status="unproven", namespace=namespace, checked_at=at, reason=reason, checks=tuple(checks)
        )
    blocked = ", ".join(c.target for c in checks if c.pod == "prober")
    reason = f"a deny-all sandbox reached none of: {blocked}; an allowed peer reached the canary"
    return EnforcementResult(
        status="enforced", namespace=namespace, checked_at=at, reason=reason, checks=tuple(checks)
    )


def isolation_proof(result: EnforcementResult) -> IsolationProof:
    """``result`` as the backend-neutral proof the controller reports."""
    return IsolationProof(
        backend="kubernetes",
        scope=result.namespace,
        status=result.status,
        checked_at=result.checked_at,
        reason=result.reason,
        evidence=tuple(c.line() for c in result.checks),
    )

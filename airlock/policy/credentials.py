"""Credentials of a compiled plan: resolving their values (backend-neutral).

Pointing an agent at its credential proxies is a step of the running agent
(:meth:`airlock.sandbox.RunningAgent.with_sidecar_routes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from layer0 import EnvError

from .plan import SandboxPlan
from .secrets import SecretResolver, resolve_secret

__all__ = [
    "PROVIDER_DEFAULT_URLS",
    "ResolvedCredentials",
    "env_var_values",
    "resolve_credentials",
]

#: Where each provider kind sends requests when its ``base_url`` is unset.
PROVIDER_DEFAULT_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai_compat": "https://api.openai.com/v1",
}


@dataclass
class ResolvedCredentials:
    """Secret values by credential name (kept in memory; redacted from everything we emit)."""

    values: dict[str, str] = field(default_factory=dict)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every value, for redaction."""
        return tuple(self.values.values())


async def resolve_credentials(plan: SandboxPlan, resolver: SecretResolver | None) -> ResolvedCredentials:
    """Look up every credential of ``plan``.

    Raises:
        EnvError: ``credential_failed`` when a secret is missing or no resolver is configured.
    """
    out = ResolvedCredentials()
    if not plan.credentials:
        return out
    if resolver is None:
        names = ", ".join(c.name for c in plan.credentials)
        raise EnvError.credential_failed(
            f"the spec asks for credentials ({names}) but this environment has no secret resolver "
            "(give the sandbox backend a SecretResolver: secrets=...)"
        )
    for c in plan.credentials:
        out.values[c.name] = await resolve_secret(resolver, c.name)
    return out


def env_var_values(plan: SandboxPlan, credentials: ResolvedCredentials) -> dict[str, str]:
    """``plan``'s env_var credentials by variable name (a warm sandbox gets them with its
    job's Execute, ``ExecuteRequest.environment``)."""
    return {
        c.var_name: credentials.values[c.name]
        for c in plan.credentials
        if c.kind == "env_var" and c.var_name is not None
    }

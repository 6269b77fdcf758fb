"""Credentials of a compiled plan: resolving their values, and pointing an agent at its sidecar.

Backend-neutral: a backend decides where its credential proxies listen and hands their URLs
to :func:`sidecar_agent`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from airlock.spec import AgentSpec
from layer0 import EnvError

from .plan import SandboxPlan
from .secrets import SecretResolver, resolve_secret

__all__ = [
    "PROVIDER_DEFAULT_URLS",
    "ResolvedCredentials",
    "env_var_values",
    "resolve_credentials",
    "sidecar_agent",
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


def sidecar_agent(agent: AgentSpec, plan: SandboxPlan, proxy_urls: Mapping[str, str]) -> AgentSpec:
    """``agent`` with its provider, and each of its http MCP servers, pointed at the credential
    proxy that carries its key.

    A sidecar route applies to a URL that is the route's upstream or lies below it (the
    provider's base URL, or its kind's default; an MCP server's ``url``); ``proxy_urls`` maps
    each sidecar credential's name to the URL of its proxy as the sandbox reaches it. The path
    below is kept (``…/v1``, ``…/mcp``). The provider's ``api_key_env`` is cleared: the proxy
    strips whatever key the runner sends. Other URLs are left alone: they go through the egress
    proxy, unauthenticated.
    """
    routes = []
    for c in plan.sidecars:
        assert c.route is not None  # a sidecar credential is compiled with its route
        routes.append((c.route.upstream.rstrip("/"), proxy_urls[c.name].rstrip("/")))

    def through_proxy(url: str) -> str | None:
        for upstream, proxy in routes:
            if url and (url == upstream or url.startswith(upstream + "/")):
                return f"{proxy}{url[len(upstream) :]}"
        return None

    update: dict[str, object] = {}
    provider = agent.provider
    url = through_proxy((provider.base_url or PROVIDER_DEFAULT_URLS.get(provider.kind, "")).rstrip("/"))
    if url is not None:
        update["provider"] = provider.model_copy(update={"base_url": url, "api_key_env": None})
    servers = [
        s.model_copy(update={"url": through})
        if s.transport == "http" and (through := through_proxy(s.url or "")) is not None
        else s
        for s in agent.mcp_servers
    ]
    if servers != agent.mcp_servers:
        update["mcp_servers"] = servers
    return agent.model_copy(update=update) if update else agent

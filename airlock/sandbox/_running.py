"""The running agent: the agent as it will run, built in one place, once per execution.

A configured agent is not yet what runs: three rewrites make it so, each a named step of
:class:`RunningAgent`, applied in this order:

1. :meth:`~RunningAgent.with_inline_script` (the controller): a scripted provider's script
   file read on the controller and put into the spec (host paths do not exist in a sandbox).
2. :meth:`~RunningAgent.with_local_model` (the controller): the ``local-model`` placeholder
   resolved to the running local model server (its key, if any, a sidecar credential).
3. :meth:`~RunningAgent.with_sidecar_routes` (the backend, late: the proxies' URLs are known
   only once it started them): the provider and http MCP servers pointed at the credential
   proxies that carry their keys.

:meth:`~RunningAgent.final` names the moment it is final: the ``AgentSpec`` the runner
inside the sandbox builds its turn from.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from airlock.errors import ConfigError
from airlock.policy import PROVIDER_DEFAULT_URLS, SandboxPlan, SidecarRoute, compile_plan
from airlock.spec import AgentSpec
from layer0 import CredentialInjection, CredentialRef, EnvironmentSpec, NetworkPolicy, NetworkRule

__all__ = ["LOCAL_MODEL", "RunningAgent", "names_local_model", "sidecar_agent"]

#: The placeholder an agent writes for the airlock-managed local model: as ``base_url`` and
#: as a network destination (resolved by :meth:`RunningAgent.with_local_model`).
LOCAL_MODEL = "local-model"


class RunningAgent(BaseModel):
    """The agent as it will run: its spec, its sandbox's environment and its sidecar routes,
    with the steps applied so far named in :attr:`steps` (each step returns a new value)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The agent as data (the runner rebuilds the turn from :meth:`final`).
    spec: AgentSpec
    #: What its sandbox must provide (isolation, resources, network, credentials).
    environment: EnvironmentSpec
    #: Routes of its sidecar credentials, by credential name.
    sidecar_routes: dict[str, SidecarRoute] = Field(default_factory=dict)
    #: The names of the steps applied, in order (``inline_script``, ``local_model``,
    #: ``sidecar_routes``).
    steps: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        spec: AgentSpec,
        environment: EnvironmentSpec,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
    ) -> Self:
        """The agent as configured, before any step."""
        return cls(spec=spec, environment=environment, sidecar_routes=dict(sidecar_routes or {}))

    @property
    def uses_local_model(self) -> bool:
        """Whether ``base_url`` or a network rule still names the ``local-model`` placeholder."""
        return names_local_model(self.spec, self.environment)

    def plan(self) -> SandboxPlan:
        """The compiled network/credential plan of its environment and sidecar routes.

        Raises:
            PolicyError: a step named a disallowed address (e.g. the local model's).
        """
        return compile_plan(self.environment, sidecar_routes=self.sidecar_routes)

    def _step(self, name: str, **update: object) -> Self:
        return self.model_copy(update={**update, "steps": (*self.steps, name)})

    def with_inline_script(self) -> Self:
        """Step ``inline_script``: a scripted provider's script file read here (on the
        controller) and put into the spec; any other agent unchanged.

        Raises:
            SpecError: the script file is missing or invalid.
        """
        p = self.spec.provider
        if p.kind != "scripted" or not isinstance(p.script, str) or p.script.lstrip().startswith(("[", "{")):
            return self._step("inline_script")
        from airlock.providers import load_script

        script = load_script(Path(p.script)).model_dump(mode="json")
        spec = self.spec.model_copy(update={"provider": p.model_copy(update={"script": script})})
        return self._step("inline_script", spec=spec)

    def with_local_model(
        self,
        base_url: str,
        *,
        credential: str | None = None,
        header: str = "authorization",
        value_prefix: str = "Bearer ",
    ) -> Self:
        """Step ``local_model``: the ``local-model`` placeholder resolved to a running server.

        ``provider.base_url: local-model`` becomes ``base_url``; each network rule whose
        destination is ``local-model`` becomes the URL's host (an IP literal as a one-address
        CIDR, so a private or bridge address is granted explicitly) with the rule's port, or
        else the URL's port.

        With ``credential`` (the server's API key, by name) the key reaches the server only
        through the credential proxy: the environment gains a sidecar credential of that name,
        and :attr:`sidecar_routes` a route to the server's origin (``scheme://host[:port]``)
        sending ``header: value_prefix + key``. ``base_url`` lies below that origin, so the
        sidecar step points the provider at the proxy; the sandbox never holds the key.

        Raises:
            ConfigError: ``base_url`` is not an http(s) URL with a host, or ``credential``
                is already used by the agent for something else.
        """
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"local model URL {base_url!r} must be an http(s) URL with a host")
        spec = self.spec
        if spec.provider.base_url == LOCAL_MODEL:
            spec = spec.model_copy(
                update={"provider": spec.provider.model_copy(update={"base_url": base_url})}
            )
        environment = _local_model_rules(
            self.environment, parts.hostname, parts.port or _default_port(parts.scheme)
        )
        routes = self.sidecar_routes
        if credential is not None:
            if any(c.name == credential for c in environment.credentials) or credential in routes:
                raise ConfigError(
                    f"agent {spec.name!r}: credential {credential!r} is reserved for the local model's key"
                )
            host = parts.hostname
            # The origin exactly as base_url spells it, so base_url lies below the upstream.
            netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
            route = SidecarRoute(
                upstream=f"{parts.scheme}://{netloc}", header=header, value_prefix=value_prefix
            )
            ref = CredentialRef(name=credential, injection=CredentialInjection.sidecar())
            environment = environment.model_copy(update={"credentials": [*environment.credentials, ref]})
            routes = {**routes, credential: route}
        return self._step("local_model", spec=spec, environment=environment, sidecar_routes=routes)

    def with_sidecar_routes(self, plan: SandboxPlan, proxy_urls: Mapping[str, str]) -> Self:
        """Step ``sidecar_routes`` (the backend's, once its credential proxies listen): the
        provider and http MCP servers pointed at the proxy carrying their key.

        ``plan`` is this agent's compiled plan; ``proxy_urls`` maps each sidecar credential's
        name to its proxy's URL as the sandbox reaches it (see :func:`sidecar_agent`).
        """
        return self._step("sidecar_routes", spec=sidecar_agent(self.spec, plan, proxy_urls))

    def final(self) -> AgentSpec:
        """The agent as it runs: the spec the runner inside the sandbox builds its turn from."""
        return self.spec


def names_local_model(spec: AgentSpec, environment: EnvironmentSpec) -> bool:
    """Whether ``spec``'s ``base_url`` or a network rule of ``environment`` names the
    ``local-model`` placeholder."""
    rules = environment.network.rules if environment.network else []
    return spec.provider.base_url == LOCAL_MODEL or any(r.destination == LOCAL_MODEL for r in rules)


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _local_model_rules(environment: EnvironmentSpec, host: str, port: int) -> EnvironmentSpec:
    """``environment`` with each ``local-model`` network rule naming ``host`` (an IP literal
    as a one-address CIDR) on the rule's port, or else ``port``."""
    if environment.network is None:
        return environment
    try:
        ip = ipaddress.ip_address(host)
        destination = f"{ip}/{ip.max_prefixlen}"
    except ValueError:
        destination = host
    rules = [
        NetworkRule(destination=destination, port=r.port or port, action=r.action)
        if r.destination == LOCAL_MODEL
        else r
        for r in environment.network.rules
    ]
    network = NetworkPolicy(default=environment.network.default, rules=rules)
    return environment.model_copy(update={"network": network})


def sidecar_agent(agent: AgentSpec, plan: SandboxPlan, proxy_urls: Mapping[str, str]) -> AgentSpec:
    """``agent`` with its provider, and each of its http MCP servers, pointed at the credential
    proxy that carries its key (what :meth:`RunningAgent.with_sidecar_routes` does to the spec).

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

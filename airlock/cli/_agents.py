"""``airlock agents ls`` and ``airlock agents show``: what each agent is and may do."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import typer
import yaml
from pydantic import BaseModel
from rich.markup import escape
from rich.table import Table

from airlock.config import AgentConfig, AirlockConfig
from airlock.errors import shorten
from airlock.policy import SandboxPlan, precheck
from airlock.policy.effects import EffectPolicy
from airlock.spec import McpServerSpec
from layer0 import EnvironmentSpec, NetworkAction, TurnConfig

if TYPE_CHECKING:
    from airlock.tools import McpProbe

from ._common import EXIT_INCOMPLETE, console, report_error


def format_ms(ms: int | None) -> str:
    """``90s``, ``5m``, ``1h30m``, ``250ms`` (``-`` for None)."""
    if ms is None:
        return "-"
    if ms < 1000 or ms % 1000:
        return f"{ms}ms" if ms < 1000 else f"{ms / 1000:g}s"
    seconds = ms // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return "".join(parts) or "0s"


def provider_summary(agent: AgentConfig) -> str:
    """``kind/model`` plus ``@ base_url`` when one is set."""
    p = agent.spec.provider
    text = f"{p.kind}/{p.model or '-'}"
    return f"{text} @ {p.base_url}" if p.base_url else text


def network_summary(env: EnvironmentSpec) -> str:
    """``none``, ``allow all``, or the allowed ``host:port`` destinations."""
    if env.network is None:
        return "none"
    allowed = [
        f"{r.destination}:{r.port}" if r.port is not None else r.destination
        for r in env.network.rules
        if r.action == NetworkAction.ALLOW
    ]
    if env.network.default == NetworkAction.ALLOW:
        return "allow all" + (f" (explicitly: {', '.join(allowed)})" if allowed else "")
    return ", ".join(allowed) if allowed else "none"


def credentials_summary(env: EnvironmentSpec) -> list[str]:
    """``name (sidecar)`` / ``name (env_var X)`` / ``name (file /p)`` per credential."""
    out = []
    for c in env.credentials:
        how = c.injection.kind
        detail = c.injection.var_name or c.injection.path
        out.append(f"{c.name} ({how} {detail})" if detail else f"{c.name} ({how})")
    return out


def resources_summary(env: EnvironmentSpec) -> str:
    """``cpu 1, memory 512Mi`` (``defaults`` when none is set)."""
    r = env.resources
    if r is None:
        return "defaults"
    parts = [
        f"{k} {v}" for k, v in (("cpu", r.cpu), ("memory", r.memory), ("disk", r.disk), ("gpu", r.gpu)) if v
    ]
    return ", ".join(parts) or "defaults"


def isolation_summary(env: EnvironmentSpec) -> str:
    """The isolation boundaries by type (``container`` when unset)."""
    return ", ".join(b.type for b in env.isolation) or "container (default)"


def limits_dict(defaults: TurnConfig) -> dict[str, Any]:
    """max_turns / max_cost / max_duration as JSON values."""
    return {
        "max_turns": defaults.max_turns,
        "max_cost": str(defaults.max_cost) if defaults.max_cost is not None else None,
        "max_duration": format_ms(defaults.max_duration) if defaults.max_duration is not None else None,
    }


def effects_rows(policy: EffectPolicy) -> list[tuple[str, str]]:
    """The effect policy as ``(grant, value)`` rows: what the controller lets the agent declare."""

    def listed(values: tuple[str, ...]) -> str:
        return ", ".join(values) or "none"

    named = {"session": "its own session", "workflow": "its workflow's", "agent": "its own in its workflow"}
    memory = ", ".join(named.get(scope, scope) for scope in policy.memory)
    return [
        ("delegate to", listed(policy.delegate)),
        ("hand off to", listed(policy.handoff)),
        ("memory", (memory or "none") + " (its session's history always)"),
        ("signal", listed(policy.signal)),
        ("custom effects", listed(policy.custom)),
        ("limits", f"{policy.max_effects} effects per turn, {policy.max_value_bytes} bytes per value"),
    ]


def mcp_egress(server: McpServerSpec, plan: SandboxPlan) -> str:
    """Whether the agent's egress policy lets its sandbox reach an http server (stdio: ``-``)."""
    if server.url is None:
        return "-"
    parts = urlsplit(server.url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"invalid port in {server.url}"
    host = parts.hostname or ""
    decision = precheck(plan.egress, host, port)
    if decision is None:
        return f"allowed by name ({host}:{port}), if it resolves to public addresses"
    return f"allowed ({decision.rule})" if decision.allowed else decision.reason


def mcp_rows(agent: AgentConfig, plan: SandboxPlan) -> list[dict[str, str]]:
    """The agent's MCP servers as rows: name, transport, command or url, allowed tools, egress."""
    return [
        {
            "server": s.name,
            "transport": s.transport,
            "command or url": shorten(shlex.join(s.command), 300) if s.transport == "stdio" else str(s.url),
            "allowed tools": ", ".join(s.allowed_tools) if s.allowed_tools is not None else "all",
            "egress": mcp_egress(s, plan),
        }
        for s in agent.spec.mcp_servers
    ]


def probe_mcp(agent: AgentConfig) -> list[McpProbe]:
    """Start or connect to each of the agent's MCP servers from this machine and list the tools
    each offers (see ``airlock.tools.probe_mcp_servers``: stdio servers run here, in an empty
    temporary directory with PATH/HOME/LANG only; http servers are reached directly)."""
    from airlock.tools import probe_mcp_servers

    return asyncio.run(probe_mcp_servers(agent.spec.mcp_servers))


PROBE_NOTE = (
    "probed from this machine, not from the sandbox: stdio servers ran here (an empty temporary "
    "workspace, PATH/HOME/LANG only, stopped afterwards); http servers were reached directly, "
    "without the egress proxy and without any sidecar credential"
)


def print_mcp(rows: list[dict[str, str]], probes: list[McpProbe] | None) -> None:
    """The MCP servers table, then (probed) each server's tools or why it is unusable."""
    table = Table(title="MCP servers (their tools are offered as <server>.<tool>)", title_justify="left")
    for column in ("server", "transport", "command or url", "allowed tools", "egress"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(v) for v in row.values()))
    console.print(table)
    if probes is None:
        return
    console.print(f"[dim]{escape(PROBE_NOTE)}[/]")
    for probe in probes:
        if probe.error is not None:
            console.print(f"[bold red]{escape(probe.server)}: unusable[/]", highlight=False)
            console.print(escape(probe.error), highlight=False, soft_wrap=True)
            continue
        tools = Table(title=f"{probe.server}: {len(probe.tools)} tool(s)", title_justify="left")
        tools.add_column("tool")
        tools.add_column("description", overflow="fold")
        for name, description in probe.tools:
            tools.add_row(escape(name), escape(description))
        console.print(tools)


def _exit_if_unusable(probes: list[McpProbe] | None) -> None:
    """Exit 1 (after everything is printed) when a probed server is unusable."""
    if probes is not None and any(p.error is not None for p in probes):
        raise typer.Exit(EXIT_INCOMPLETE)


def probe_json(probes: list[McpProbe]) -> dict[str, Any]:
    """The probe's findings by server name (``tools``: name → description; ``error``)."""
    return {
        p.server: {"tools": [{"name": n, "description": d} for n, d in p.tools], "error": p.error}
        for p in probes
    }


def agent_summary(agent: AgentConfig) -> dict[str, Any]:
    """One agent as a JSON object (what ``agents ls --json`` lists)."""
    env = agent.environment
    p = agent.spec.provider
    return {
        "name": agent.name,
        "backend": agent.backend,
        "provider": {"kind": p.kind, "model": p.model, "base_url": p.base_url},
        "tools": list(agent.spec.tools),
        "mcp_servers": [s.name for s in agent.spec.mcp_servers],
        "isolation": [b.type for b in env.isolation],
        "network": network_summary(env),
        "credentials": credentials_summary(env),
        "resources": env.resources.model_dump(mode="json") if env.resources else None,
        "limits": limits_dict(agent.spec.defaults),
        "uses_local_model": agent.uses_local_model,
        "source": f"{agent.source}:{agent.line}",
    }


def agents_ls(cfg: AirlockConfig, *, as_json: bool) -> None:
    """Print every agent: a table, or a JSON list."""
    agents = sorted(cfg.agents.values(), key=lambda a: a.name)
    if as_json:
        print(json.dumps([agent_summary(a) for a in agents], indent=2))
        return
    if not agents:
        console.print("no agents defined in " + ", ".join(str(f) for f in cfg.files))
        return
    table = Table(title=f"agents in {', '.join(str(f) for f in cfg.files)}", title_justify="left")
    for column in ("name", "backend", "provider/model", "tools", "network", "credentials", "resources"):
        table.add_column(column, overflow="fold")
    for a in agents:
        env = a.environment
        table.add_row(
            escape(a.name),
            a.backend,
            escape(provider_summary(a)),
            escape(", ".join(a.spec.tools) or "-"),
            escape(network_summary(env)),
            escape(", ".join(credentials_summary(env)) or "-"),
            escape(resources_summary(env)),
        )
    console.print(table)


def backend_objects(
    agent: AgentConfig, plan: SandboxPlan, settings: BaseModel | None
) -> list[dict[str, Any]]:
    """What the agent's backend makes of its plan on the cluster (e.g. NetworkPolicies); empty
    for a backend that has nothing beyond the plan to show."""
    from airlock.sandbox import backend

    render = backend(agent.backend).policy_objects
    return render(plan, settings) if render is not None else []


def agents_show(
    agent: AgentConfig, *, as_json: bool, settings: BaseModel | None = None, probe: bool = False
) -> None:
    """Print the effective sandbox policy of one agent (``settings``: its backend's section of
    the configuration); ``probe``: also start or connect to its MCP servers and list their
    tools (see :func:`probe_mcp`), and exit 1 when one is unusable."""
    try:
        plan = agent.plan()
    except Exception as e:  # PolicyError (a ConfigError) → exit 2; anything else mapped too
        report_error(e)
    mcp = mcp_rows(agent, plan)
    probes = probe_mcp(agent) if probe and agent.spec.mcp_servers else None
    if as_json:
        data = {
            **agent_summary(agent),
            "spec": agent.spec.model_dump(mode="json"),
            "environment": agent.environment.model_dump(mode="json"),
            "effects": agent.effects.summary(),
            "plan": {
                "egress_default": str(plan.egress.default),
                "egress": plan.egress_rows(),
                "credentials": plan.credential_rows(),
            },
            "backend_objects": backend_objects(agent, plan, settings),
            "mcp": mcp,
        }
        if probes is not None:
            data["mcp_probe"] = probe_json(probes)
        print(json.dumps(data, indent=2))
        _exit_if_unusable(probes)
        return
    spec = agent.spec
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    rows = [
        ("agent", agent.name),
        ("defined at", f"{agent.source}:{agent.line}"),
        ("backend", agent.backend),
        ("isolation", isolation_summary(agent.environment)),
        ("provider", provider_summary(agent)),
        ("system", spec.system or "-"),
        ("tools", ", ".join(spec.tools) or "-"),
        ("context", f"{spec.context.strategy} (max {spec.context.max_tokens} tokens)"),
        ("hooks", ", ".join(h.name for h in spec.hooks) or "-"),
        ("resources", resources_summary(agent.environment)),
        (
            "limits",
            ", ".join(f"{k} {v}" for k, v in limits_dict(spec.defaults).items() if v is not None) or "-",
        ),
    ]
    if spec.tool_options:
        rows.insert(7, ("tool options", json.dumps(spec.tool_options, sort_keys=True)))
    if agent.uses_local_model:
        rows.append(("local model", "`local-model` is resolved at run time to the server airlock starts"))
    for key, value in rows:
        head.add_row(key, escape(str(value)))
    console.print(head)
    console.print()
    if mcp:
        print_mcp(mcp, probes)
        console.print()
    egress = Table(
        title=f"egress (default {plan.egress.default}; private, loopback, link-local and metadata "
        "addresses only via an explicit CIDR rule)",
        title_justify="left",
    )
    egress_rows = plan.egress_rows()
    for column in egress_rows[0] if egress_rows else ("#", "action", "destination", "port"):
        egress.add_column(column, overflow="fold")
    for row in egress_rows:
        egress.add_row(*(escape(v) for v in row.values()))
    console.print(egress)
    effects = Table(
        title="effects (what the controller applies from its turns; anything else is refused)",
        title_justify="left",
    )
    effects.add_column("grant")
    effects.add_column("value", overflow="fold")
    for grant, value in effects_rows(agent.effects):
        effects.add_row(grant, escape(value))
    console.print(effects)
    cred_rows = plan.credential_rows()
    if not cred_rows:
        console.print("credentials: none")
    else:
        creds = Table(title="credentials (by secret name; values never shown)", title_justify="left")
        for column in cred_rows[0]:
            creds.add_column(column, overflow="fold")
        for row in cred_rows:
            creds.add_row(*(escape(v) for v in row.values()))
        console.print(creds)
    objects = backend_objects(agent, plan, settings)
    if objects:
        console.print()
        console.print(
            f"[bold]{agent.backend} objects[/] (as the API server receives them; example sandbox id)"
        )
        console.print(escape(yaml.safe_dump_all(objects, sort_keys=False)), highlight=False, soft_wrap=True)
    _exit_if_unusable(probes)

"""The configured agents and each one's effective sandbox policy (what ``airlock agents show
--json`` prints of it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from airlock.config import AgentConfig

from ._auth import Caller
from ._deps import Service
from ._errors import ApiError

router = APIRouter(prefix="/api/v1/agents", tags=["agents"])


def agent_json(agent: AgentConfig) -> dict[str, Any]:
    """An agent and its effective policy."""
    plan = agent.plan()
    provider = agent.spec.provider
    return {
        "name": agent.name,
        "backend": agent.backend,
        "provider": {"kind": provider.kind, "model": provider.model},
        "tools": list(agent.spec.tools),
        "uses_local_model": agent.uses_local_model,
        "environment": agent.environment.model_dump(mode="json"),
        "effects": agent.effects.summary(),
        "approval": agent.approval.model_dump(mode="json") if agent.approval else None,
        "egress": {"default": str(plan.egress.default), "rules": plan.egress_rows()},
        "credentials": plan.credential_rows(),
    }


@router.get("")
async def list_agents(principal: Caller, service: Service) -> dict[str, Any]:
    """Every configured agent, by name."""
    agents = sorted(service.runner.config.agents.items())
    return {"agents": [agent_json(a) for _, a in agents]}


@router.get("/{name}")
async def show_agent(name: str, principal: Caller, service: Service) -> dict[str, Any]:
    """One agent."""
    agent = service.runner.config.agents.get(name)
    if agent is None:
        raise ApiError(404, "NOT_FOUND", f"no agent {name!r}")
    return agent_json(agent)

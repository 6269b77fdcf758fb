"""RemoteOrchestrator over a real controller (gRPC on loopback, process backend, scripted
provider): the Orchestrator conformance suite, then what only a controller answers (a
workflow's jobs, spend and budget) and that a dispatch carries its whole TurnInput."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airlock.jobs import (
    ControllerClient,
    Job,
    JobError,
    JobErrorKind,
    JobFilter,
    JobState,
    RemoteOrchestrator,
    utcnow,
)
from airlock.jobs._remote_orchestrator import error_of
from airlock.testing import text_step, tool_step
from layer0 import (
    AgentId,
    OrchError,
    QueryPayload,
    SessionId,
    TriggerType,
    TurnConfig,
    TurnError,
    TurnInput,
    WorkflowId,
)
from tests.support.controller import running_controller
from tests.support.orchestrator_suite import *  # noqa: F403 - the conformance suite runs here
from tests.support.orchestrator_suite import ANSWER, BROKEN, ECHO

pytestmark = pytest.mark.timeout(120)

#: The workflow the module's dispatched jobs are recorded under.
WORKFLOW = WorkflowId("remote-dispatch")


#: Waits for a person's approval of its first tool call.
GATED = AgentId("gated")
#: No max_cost of its own: the tenant's cost_per_day caps its turns.
UNCAPPED = AgentId("uncapped")
#: The root of a tree with a budget of its own.
BOUNDED = AgentId("bounded")


def _agent(steps: list[dict[str, Any]], tools: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    provider = {"kind": "scripted", "script": steps}
    return {"provider": provider, "tools": tools or [], "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        str(ECHO): _agent([text_step(ANSWER, usage=(11, 7), cost="0.0125")], defaults={"max_cost": "0.50"}),
        # the first model call finds the script exhausted
        str(BROKEN): _agent([], defaults={"max_cost": "0.50"}),
        str(GATED): _agent(
            [tool_step("bash", {"command": "echo gated"}, id="g1"), text_step("done")],
            tools=["bash"],
            approval={"tools": ["bash"], "approvers": ["alice"]},
            defaults={"max_cost": "0.50"},
        ),
        str(UNCAPPED): _agent([text_step(ANSWER)]),
        str(BOUNDED): _agent(
            [text_step(ANSWER, usage=(11, 7), cost="0.0125")],
            defaults={"max_cost": "0.50"},
            tree_budget={"max_cost": "1.00"},
        ),
    },
    # a max_cost at most the quota's: a turn's input is then not capped by it
    "auth": {"tenants": {"default": {"quotas": {"cost_per_day": "5"}}}},
}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[ControllerClient]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with running_controller(path, tmp_path / "data", tmp_path / "sandboxes", "unused") as (_, client):
        yield client


@pytest.fixture
def orch(client: ControllerClient) -> RemoteOrchestrator:
    return RemoteOrchestrator(client, workflow=WORKFLOW)


def _query(query_type: str) -> QueryPayload:
    return QueryPayload(query_type=query_type, params=None)


async def test_status_lists_the_workflows_jobs_and_their_states(orch: RemoteOrchestrator) -> None:
    await orch.dispatch_many([(ECHO, TurnInput.new("a")), (BROKEN, TurnInput.new("b"))])
    status = await orch.query(WORKFLOW, _query("status"))
    assert status["workflow"] == str(WORKFLOW)
    assert sorted((j["agent"], j["state"]) for j in status["jobs"]) == [
        (str(BROKEN), "failed"),
        (str(ECHO), "succeeded"),
    ]
    assert status["states"] == {"failed": 1, "succeeded": 1}
    assert status["signal_count"] == 0


async def test_spend_sums_the_tokens_and_cost_of_the_workflows_jobs(orch: RemoteOrchestrator) -> None:
    await orch.dispatch_many([(ECHO, TurnInput.new("a")), (ECHO, TurnInput.new("b"))])
    spend = await orch.query(WORKFLOW, _query("spend"))
    assert (spend["jobs"], spend["tokens_in"], spend["tokens_out"]) == (2, 22, 14)
    assert Decimal(spend["cost"]) == Decimal("0.0250")
    assert [Decimal(j["cost"]) for j in spend["by_job"]] == [Decimal("0.0125")] * 2


async def test_budget_names_each_turns_max_cost_and_the_tenants_quotas(orch: RemoteOrchestrator) -> None:
    own = TurnInput.new("capped").model_copy(update={"config": TurnConfig(max_cost=Decimal("0.25"))})
    await orch.dispatch(ECHO, own)
    await orch.dispatch(ECHO, TurnInput.new("agent default"))
    budget = await orch.query(WORKFLOW, _query("budget"))
    assert Decimal(budget["spent"]) == Decimal("0.0250")
    rows = [(Decimal(j["max_cost"]), Decimal(j["remaining"])) for j in budget["jobs"]]
    assert sorted(rows) == [
        (Decimal("0.25"), Decimal("0.2375")),
        (Decimal("0.50"), Decimal("0.4875")),
    ]
    quotas = {q["quota"]: q for q in budget["quotas"]}
    assert quotas["cost_per_day"]["limit"] is not None
    assert Decimal(quotas["cost_per_day"]["remaining"]) == Decimal(quotas["cost_per_day"]["limit"]) - Decimal(
        quotas["cost_per_day"]["used"]
    )
    assert quotas["concurrent_jobs"]["remaining"] is None  # no limit


async def test_a_dispatch_carries_its_whole_turn_input(
    orch: RemoteOrchestrator, client: ControllerClient
) -> None:
    sent = TurnInput(
        message="with everything",
        trigger=TriggerType.custom("webhook"),
        session=SessionId("s-remote"),
        config=TurnConfig(max_turns=3, system_addendum="be brief"),
        metadata={"ticket": 42, "tags": ["a", "b"]},
    )
    await orch.dispatch(ECHO, sent)
    [job] = (await orch.query(WORKFLOW, _query("status")))["jobs"]
    assert (await client.get(job["id"])).input == sent


async def test_a_bad_query_of_a_workflow_with_jobs_is_other(orch: RemoteOrchestrator) -> None:
    await orch.dispatch(ECHO, TurnInput.new("x"))
    with pytest.raises(OrchError) as caught:
        await orch.query(WORKFLOW, _query("everything"))
    assert caught.value.kind == "other" and "status, spend, budget" in str(caught.value)


def _ended(state: JobState, kind: JobErrorKind, retryable: bool = False) -> Job:
    return Job(
        id="j-1",
        agent="a",
        state=state,
        input=TurnInput.new("x"),
        queue="a",
        workflow="j-1",
        created_at=utcnow(),
        error=JobError(kind=kind, message="it ended", retryable=retryable),
    )


@pytest.mark.parametrize(
    ("kind", "orch_kind", "turn_kind"),
    [
        (JobErrorKind.MODEL, "turn_error", "model"),
        (JobErrorKind.NON_RETRYABLE, "turn_error", "non_retryable"),
        (JobErrorKind.TURN_ERROR, "turn_error", "other"),
        (JobErrorKind.AGENT_NOT_FOUND, "agent_not_found", None),
        (JobErrorKind.CANCELLED, "dispatch_failed", None),
        (JobErrorKind.PROVISION_FAILED, "dispatch_failed", None),
        (JobErrorKind.TIMEOUT, "dispatch_failed", None),
    ],
)
def test_a_jobs_error_is_the_orch_error_of_its_kind(
    kind: JobErrorKind, orch_kind: str, turn_kind: str | None
) -> None:
    error = error_of(AgentId("a"), _ended(JobState.FAILED, kind))
    assert error.kind == orch_kind and "j-1" in str(error) and "it ended" in str(error)
    cause = error.__cause__
    assert (cause.kind if isinstance(cause, TurnError) else None) == turn_kind


def test_a_retryable_turn_error_stays_retryable() -> None:
    error = error_of(AgentId("a"), _ended(JobState.FAILED, JobErrorKind.TURN_ERROR, retryable=True))
    assert isinstance(error.__cause__, TurnError) and error.__cause__.is_retryable


async def test_a_refused_submission_is_dispatch_failed(orch: RemoteOrchestrator) -> None:
    with pytest.raises(OrchError) as caught:
        await orch.dispatch(ECHO, TurnInput.new(""))
    assert caught.value.kind == "dispatch_failed" and str(ECHO) in str(caught.value)


async def test_a_cancelled_dispatch_cancels_its_job(
    orch: RemoteOrchestrator, client: ControllerClient
) -> None:
    dispatch = asyncio.create_task(orch.dispatch(GATED, TurnInput.new("wait for a person")))
    waiting = await _first_job(client, JobState.AWAITING_APPROVAL)
    dispatch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await dispatch
    assert (await client.get(waiting.id)).state is JobState.CANCELLED


async def _first_job(client: ControllerClient, state: JobState) -> Job:
    """The first job of WORKFLOW once it is in ``state`` (the test's timeout bounds the wait)."""
    while True:
        found = [j for j in await client.find(JobFilter(workflow=str(WORKFLOW))) if j.state is state]
        if found:
            return found[0]
        await asyncio.sleep(0.05)


async def test_a_turn_capped_by_the_tenants_cost_per_day_succeeds(orch: RemoteOrchestrator) -> None:
    # the turn's max_cost is capped to what the tenant may still spend today before anything
    # records its input: its checkpoints match it (a cap taken later read as a changed input)
    assert (await orch.dispatch(UNCAPPED, TurnInput.new("no max_cost"))).message.as_text() == ANSWER


async def test_budget_names_the_tree_budget_of_each_root(orch: RemoteOrchestrator) -> None:
    await orch.dispatch(BOUNDED, TurnInput.new("within the tree's budget"))
    budget = await orch.query(WORKFLOW, _query("budget"))
    (tree,) = budget["trees"]
    assert Decimal(tree["spent"]) == Decimal("0.0125") and Decimal(tree["max_cost"]) == Decimal("1.00")
    assert tree["decision"] == "continue" and tree["tokens"] == 18

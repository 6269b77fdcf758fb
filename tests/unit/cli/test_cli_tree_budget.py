"""``airlock jobs show`` of a tree's root: what its tree spent against its tree budget, through a
real ControllerServer over the controller tests' fake JobService."""

from __future__ import annotations

from decimal import Decimal

from typer.testing import CliRunner

from airlock.jobs import TreeBudgetChanged, TreeBudgetUse
from airlock.jobs import convert as jc
from tests.unit.cli.test_cli_governance import flat, invoke, invoke_json, render, service
from tests.unit.controller.test_api_governance import FakeService, awaiting_job

__all__ = ["service"]  # the fixture

USE = TreeBudgetUse(
    decision="downgrade_model",
    spent=Decimal("1.70"),
    tokens=300,
    elapsed_ms=4000,
    max_cost=Decimal("2.00"),
    max_tokens=1000,
    max_duration_ms=600_000,
    model="cheaper-model",
)


def test_a_roots_tree_budget_round_trips_on_the_wire() -> None:
    job = awaiting_job("j-tree").model_copy(update={"approval": None, "tree_budget": USE})
    assert jc.job_from_proto(jc.job_to_proto(job)).tree_budget == USE
    plain = job.model_copy(update={"tree_budget": None})
    assert jc.job_from_proto(jc.job_to_proto(plain)).tree_budget is None


def test_jobs_show_prints_the_trees_spend_against_its_limits(runner: CliRunner, service: FakeService) -> None:
    service.add(
        awaiting_job("j-tree").model_copy(update={"approval": None, "resumes": 0, "tree_budget": USE})
    )
    out = flat(invoke(runner, "jobs", "show", "j-tree").stdout)
    assert (
        "tree budget $1.7 of $2, 300 of 1000 tokens, 4s of 10m; model cheaper-model (downgrade_model)" in out
    )
    body = invoke_json(runner, "jobs", "show", "j-tree")
    assert body["job"]["tree_budget"]["decision"] == "downgrade_model"
    assert body["job"]["tree_budget"]["spent"] == "1.70"


def test_jobs_watch_prints_each_decision_with_its_reason() -> None:
    halt = TreeBudgetChanged(
        decision="halt_workflow",
        spent=Decimal("2.10"),
        max_cost=Decimal("2.00"),
        reason="exhausted: cost 2.10 of max_cost 2.00",
    )
    out = flat(render(halt))
    assert "tree budget halt_workflow: $2.1 of $2: exhausted: cost 2.10 of max_cost 2.00" in out

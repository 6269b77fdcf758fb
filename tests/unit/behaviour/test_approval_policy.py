"""How approvers' decisions combine under each strategy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airlock.behaviour import ApprovalDecision, ApprovalPolicy

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def d(who: str, approve: bool = True, automatic: bool = False) -> ApprovalDecision:
    return ApprovalDecision(approver=who, approve=approve, time=NOW, automatic=automatic)


def policy(strategy: str, approvers: tuple[str, ...] = ("a", "b", "c")) -> ApprovalPolicy:
    return ApprovalPolicy(tools=("bash",), approvers=approvers, strategy=strategy)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("strategy", "decisions", "outcome"),
    [
        ("any", [], None),
        ("any", [d("a")], "approved"),
        # any: the first decision settles it, an approval or a rejection
        ("any", [d("a", False)], "rejected"),
        ("any", [d("a", False), d("b")], "rejected"),
        ("any", [d("a"), d("b", False)], "approved"),
        # all: every approval approves, any rejection rejects
        ("all", [d("a"), d("b")], None),
        ("all", [d("a"), d("b"), d("c")], "approved"),
        ("all", [d("a"), d("b", False)], "rejected"),
        ("all", [d("c", False)], "rejected"),
        # the first decision that settles the wait stays its outcome
        ("all", [d("a", False), d("a"), d("b"), d("c")], "rejected"),
        ("majority", [d("a")], None),
        ("majority", [d("a"), d("b")], "approved"),
        ("majority", [d("a", False), d("b", False)], "rejected"),
        ("majority", [d("a"), d("b", False)], None),
        # until then an approver's latest decision counts; strangers count for nothing
        ("majority", [d("a", False), d("a"), d("b")], "approved"),
        ("majority", [d("a"), d("a", False), d("b", False)], "rejected"),
        ("any", [d("mallory")], None),
        ("any", [d("mallory", False)], None),
    ],
)
def test_strategies(strategy: str, decisions: list[ApprovalDecision], outcome: str | None) -> None:
    assert policy(strategy).outcome(decisions) == outcome


def test_majority_of_an_even_number_needs_more_than_half() -> None:
    even = policy("majority", ("a", "b", "c", "d"))
    assert even.needed == 3
    assert even.outcome([d("a"), d("b")]) is None
    assert even.outcome([d("a", False), d("b", False)]) == "rejected"
    assert (even.needed, even.rejections_needed) == (3, 2)


def test_no_approvers_approves_at_once_and_an_automatic_decision_is_final() -> None:
    nobody = ApprovalPolicy(tools=("bash",))
    assert nobody.needed == 0 and nobody.outcome([]) == "approved"
    assert policy("all").outcome([d("a"), d("policy", False, automatic=True)]) == "rejected"


def test_approver_names_are_checked() -> None:
    p = policy("any")
    assert p.approver_problem("a") is None
    assert "not an approver" in (p.approver_problem("eve") or "")
    assert "no approver" in (ApprovalPolicy(tools=("x",)).approver_problem("a") or "")
    assert p.gate().tools == ["bash"]

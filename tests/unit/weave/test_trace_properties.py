"""Properties of the trace over random DAGs (hypothesis): linearizations, subsets, commuting
independent records, and the causal queries against a brute-force reading of the braid."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.weave import Weave, verify

from .helpers import draft

JOBS = ("a", "b", "c", "d")


@st.composite
def weaves(draw: st.DrawFn) -> Weave:
    """Random threads; each record depends on a random set of earlier records (or, with
    none, on its thread's previous record)."""
    w = Weave()
    for _ in range(draw(st.integers(min_value=1, max_value=24))):
        job = draw(st.sampled_from(JOBS))
        ids = [r.id for r in w.records]
        deps = draw(st.lists(st.sampled_from(ids), unique=True, max_size=3)) if ids else []
        w.record(draft(job, *deps))
    return w


def ancestors(w: Weave) -> dict[str, set[str]]:
    """Transitive predecessors by depth-first search over the braid."""
    braid = w.braid()
    found: dict[str, set[str]] = {}
    for record_id in braid:
        seen: set[str] = set()
        stack = list(braid[record_id])
        while stack:
            dep = stack.pop()
            if dep not in seen:
                seen.add(dep)
                stack.extend(braid[dep])
        found[record_id] = seen
    return found


def dependent(w: Weave, anc: dict[str, set[str]], x: str, y: str) -> bool:
    same_thread = x.rsplit(":", 1)[0] == y.rsplit(":", 1)[0]
    return same_thread or x in anc[y] or y in anc[x]


def assert_respects_the_order(w: Weave, order: list[str]) -> None:
    anc = ancestors(w)
    at = {record_id: i for i, record_id in enumerate(order)}
    assert len(at) == len(order)
    for x, y in itertools.permutations(order, 2):
        if x in anc[y]:
            assert at[x] < at[y], (x, y, order)
    for job in JOBS:
        ns = [int(i.rsplit(":", 1)[1]) for i in order if i.startswith(f"{job}:")]
        assert ns == sorted(ns)


@settings(deadline=None)
@given(weaves())
def test_linearize_is_a_topological_order_of_every_record(w: Weave) -> None:
    order = [r.id for r in w.linearize()]
    assert sorted(order) == sorted(r.id for r in w.records)
    assert_respects_the_order(w, order)
    for record_id, deps in w.braid().items():
        assert all(order.index(d) < order.index(record_id) for d in deps)
    assert verify(w.linearize()).ok
    assert w.linearize() == w.linearize()  # deterministic


@settings(deadline=None)
@given(st.data())
def test_linearize_a_subset_respects_the_induced_order(data: st.DataObject) -> None:
    w = data.draw(weaves())
    subset = data.draw(st.sets(st.sampled_from([r.id for r in w.records])))
    order = [r.id for r in w.linearize(subset)]
    assert sorted(order) == sorted(subset)
    assert_respects_the_order(w, order)


@settings(deadline=None)
@given(weaves())
def test_swapping_adjacent_records_is_equivalent_exactly_when_they_are_independent(w: Weave) -> None:
    anc = ancestors(w)
    records = w.linearize()
    order = [r.id for r in records]
    for i in range(len(order) - 1):
        x, y = order[i], order[i + 1]
        swapped = [*order[:i], y, x, *order[i + 2 :]]
        independent = w.independent(x, y)
        assert independent == (not dependent(w, anc, x, y))
        assert w.equivalent(order, swapped) == independent
        assert w.equivalent(swapped, order) == independent
        # a swap of independent records is still a valid order; of dependent ones it is not
        reordered = [*records[:i], records[i + 1], records[i], *records[i + 2 :]]
        assert verify(reordered).ok == independent


@settings(deadline=None)
@given(st.data())
def test_equivalent_matches_its_definition_on_any_two_orders(data: st.DataObject) -> None:
    w = data.draw(weaves())
    anc = ancestors(w)
    subset = sorted(data.draw(st.sets(st.sampled_from([r.id for r in w.records]), max_size=8)))
    a = data.draw(st.permutations(subset))
    b = data.draw(st.one_of(st.permutations(subset), st.just([r.id for r in w.linearize(subset)])))
    pos_a = {x: i for i, x in enumerate(a)}
    pos_b = {x: i for i, x in enumerate(b)}
    expected = all(
        (pos_a[x] < pos_a[y]) == (pos_b[x] < pos_b[y])
        for x, y in itertools.combinations(subset, 2)
        if dependent(w, anc, x, y)
    )
    assert w.equivalent(a, b) == expected


@settings(deadline=None)
@given(weaves())
def test_causal_queries_match_the_braid(w: Weave) -> None:
    anc = ancestors(w)
    by_id = {r.id: r for r in w.records}
    for record_id, past in anc.items():
        assert w.dependencies(record_id) == past
        assert all(by_id[record_id].clock > by_id[d].clock for d in past)
        assert [r.id for r in w.cone_of(record_id)][-1] == record_id
        assert {r.id for r in w.cone_of(record_id)} == past | {record_id}
    for x, y in itertools.combinations(anc, 2):
        assert w.independent(x, y) == (not dependent(w, anc, x, y))
    reloaded = Weave(w.records)
    assert reloaded.braid() == w.braid()
    assert reloaded.linearize() == w.linearize()

"""Causal cones: an agent's tip and everything it transitively depends on."""

from __future__ import annotations

import pytest

from airlock.weave import ConeMetrics, Weave

from .helpers import draft


def diamond() -> Weave:
    """A delegates to B and C; D depends on B and C; E works alone; A goes on after delegating."""
    w = Weave()
    w.record(draft("a", agent="A"))
    w.record(draft("a", agent="A", content={"tool": "delegate"}))
    w.record(draft("b", "a:2", agent="B"))
    w.record(draft("c", "a:2", agent="C"))
    w.record(draft("e", agent="E"))
    w.record(draft("c", agent="C"))
    w.record(draft("d", *w.knot(["B", "C"]), agent="D"))
    w.record(draft("a", agent="A"))  # after the delegation, unrelated to D
    w.record(draft("e", agent="E"))
    return w


def test_the_cone_of_the_join_holds_both_branches_and_their_source() -> None:
    w = diamond()
    cone = [r.id for r in w.cone("D")]
    assert set(cone) == {"a:1", "a:2", "b:1", "c:1", "c:2", "d:1"}
    assert cone[0] == "a:1" and cone[-1] == "d:1"
    assert cone.index("c:1") < cone.index("c:2")
    assert {r.agent for r in w.cone("D")} == {"A", "B", "C", "D"}


def test_an_independent_agent_and_later_records_are_excluded() -> None:
    w = diamond()
    ids = {r.id for r in w.cone("D")}
    assert not ids & {"e:1", "e:2", "a:3"}
    assert [r.id for r in w.cone("E")] == ["e:1", "e:2"]


def test_transitive_reads_are_included() -> None:
    w = Weave()
    w.record(draft("a", agent="A"))
    w.record(draft("b", "a:1", agent="B"))
    w.record(draft("d", "b:1", agent="D"))
    w.record(draft("e", agent="E"))
    assert [r.id for r in w.cone("D")] == ["a:1", "b:1", "d:1"]
    assert [r.id for r in w.cone_of("b:1")] == ["a:1", "b:1"]


def test_cone_metrics() -> None:
    w = diamond()
    metrics = w.cone_metrics("D")
    assert (metrics.cone_size, metrics.total) == (6, 9)
    assert metrics.compression_ratio == pytest.approx(1 - 6 / 9)
    assert w.cone_metrics("A").cone_size == 3  # a:1..a:3: its own thread only
    assert w.cone_metrics("ghost") == ConeMetrics(cone_size=0, total=9, compression_ratio=1.0)
    assert w.cone("ghost") == []
    assert Weave().cone_metrics("D") == ConeMetrics(cone_size=0, total=0, compression_ratio=0.0)

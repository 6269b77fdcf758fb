"""Weave.record: numbering, dependencies, Lamport clocks, hashes; the accessors; equivalence."""

from __future__ import annotations

import pytest

from airlock.weave import RecordType, Weave, content_digest, record_hash, verify

from .helpers import draft


def delegation() -> Weave:
    """A parent delegates to two children who work in parallel; the parent knots their tips."""
    w = Weave()
    w.record(draft("p", agent="planner", type=RecordType.SPEECH, kind="model_response"))
    w.record(draft("p", agent="planner", kind="tool_call", content={"tool": "delegate"}))
    w.record(draft("c1", "p:2", agent="coder", kind="model_response"))
    w.record(draft("c2", "p:2", agent="tester", kind="model_response"))
    w.record(draft("c1", agent="coder", kind="tool_call"))
    w.record(draft("c1", agent="coder", kind="tool_call"))
    w.record(draft("c2", agent="tester", type=RecordType.YIELD, kind="iteration"))
    w.record(draft("p", *w.knot(["coder", "tester"]), agent="planner", type=RecordType.YIELD, kind="knot"))
    return w


def test_lamport_clocks_respect_causality_across_threads() -> None:
    w = delegation()
    by_id = {r.id: r for r in w.records}
    for record_id, deps in w.braid().items():
        for dep in deps:
            assert by_id[record_id].clock > by_id[dep].clock, (record_id, dep)
        for dep in w.dependencies(record_id):
            assert by_id[record_id].clock > by_id[dep].clock, (record_id, dep)
    knot = by_id["p:3"]
    assert knot.depends_on == ("c1:3", "c2:2")
    assert knot.clock == max(by_id["c1:3"].clock, by_id["c2:2"].clock) + 1
    assert by_id["c1:1"].clock == by_id["c2:1"].clock == by_id["p:2"].clock + 1


def test_linearize_puts_dependencies_first() -> None:
    w = delegation()
    order = [r.id for r in w.linearize()]
    assert sorted(order) == sorted(r.id for r in w.records)
    for record_id, deps in w.braid().items():
        assert all(order.index(d) < order.index(record_id) for d in deps)
    assert order[:2] == ["p:1", "p:2"] and order[-1] == "p:3"
    assert verify(w.linearize()).ok  # a linearization is itself a valid storage order


def test_independence_and_dependencies() -> None:
    w = delegation()
    assert w.independent("c1:1", "c2:1")
    assert w.independent("c1:3", "c2:2")
    assert not w.independent("p:2", "c1:1")  # a child depends on the delegation
    assert not w.independent("c1:1", "c1:3")  # one thread
    assert not w.independent("p:1", "c2:2")  # transitively
    assert not w.independent("c1:1", "c1:1")
    assert w.dependencies("c2:2") == {"p:1", "p:2", "c2:1"}
    assert w.dependencies("p:3") == {"p:1", "p:2", "c1:1", "c1:2", "c1:3", "c2:1", "c2:2"}
    assert w.dependencies("p:1") == frozenset()
    with pytest.raises(ValueError, match="no record"):
        w.dependencies("nope:1")


def test_a_record_follows_its_thread_unless_its_dependencies_are_explicit() -> None:
    w = Weave()
    response = w.record(draft("j", kind="model_response"))
    call_a = w.record(draft("j", "j:1"))
    call_b = w.record(draft("j", "j:1"))  # a parallel tool call: not dependent on call_a
    after = w.record(draft("j", kind="model_response"))
    assert (response.n, response.clock, response.depends_on, response.prev_hash) == (1, 1, (), None)
    assert (call_a.n, call_a.clock, call_a.depends_on) == (2, 2, ("j:1",))
    assert (call_b.n, call_b.clock, call_b.depends_on) == (3, 3, ("j:1",))
    assert call_b.prev_hash == call_a.hash
    assert (after.depends_on, after.clock) == (("j:3",), 4)
    assert w.braid()["j:3"] == {"j:1", "j:2"}  # program order is part of causality


def test_a_record_carries_its_digest_and_hash_and_a_seal_with_a_key() -> None:
    unkeyed, keyed = Weave(), Weave(key=b"k")
    a = unkeyed.record(draft("j", content={"x": 1}))
    b = keyed.record(draft("j", content={"x": 1}))
    assert a.id == "j:1"
    assert a.digest == content_digest({"x": 1})
    assert a.hash == record_hash(a) and a.hash.startswith("sha256:") and len(a.hash) == 7 + 64
    assert a.seal is None
    assert b.seal is not None and b.seal.startswith("hmac-sha256:")
    assert a.hash == b.hash


def test_unknown_or_repeated_dependencies_are_refused() -> None:
    w = Weave()
    w.record(draft("j"))
    with pytest.raises(ValueError, match="not in the weave"):
        w.record(draft("k", "j:2"))
    with pytest.raises(ValueError, match="twice"):
        w.record(draft("k", "j:1", "j:1"))
    assert len(w) == 1


def test_accessors() -> None:
    w = delegation()
    w.record(draft("c3", "p:3", agent="coder"))  # the coder's second job
    assert len(w) == 9
    assert w.threads() == ["p", "c1", "c2", "c3"]
    assert [r.id for r in w.thread("coder")] == ["c1:1", "c1:2", "c1:3", "c3:1"]
    assert [r.id for r in w.job_thread("c2")] == ["c2:1", "c2:2"]
    assert w.thread("nobody") == [] and w.job_thread("nope") == []
    got = w.get("c2:2")
    assert got is not None and got.kind == "iteration"
    assert w.get("c2:9") is None
    assert "p:1" in w and "p:9" not in w
    assert [r.id for r in w] == [r.id for r in w.records]

    tester_tip, coder_tip, tip = w.tip("tester"), w.tip("coder"), w.tip()
    assert tester_tip is not None and tester_tip.id == "c2:2"
    assert coder_tip is not None and coder_tip.id == "c3:1"
    assert tip is not None and tip.id == "c3:1"
    assert w.tip("nobody") is None and Weave().tip() is None


def test_the_tip_is_the_latest_by_clock_not_by_insertion() -> None:
    w = Weave()
    for _ in range(3):
        w.record(draft("long"))
    w.record(draft("short"))
    tip = w.tip()
    assert tip is not None and tip.id == "long:3"


def test_knot_names_the_tips_once_and_refuses_an_agent_without_records() -> None:
    w = delegation()
    assert w.knot(["tester", "coder", "tester"]) == ("c2:2", "c1:3")
    with pytest.raises(ValueError, match="'ghost' has no record"):
        w.knot(["coder", "ghost"])


def test_equivalent_orders() -> None:
    w = delegation()
    order = [r.id for r in w.linearize()]
    assert w.equivalent(order, order)
    # the children's records interleave freely
    other = ["p:1", "p:2", "c2:1", "c2:2", "c1:1", "c1:2", "c1:3", "p:3"]
    assert w.equivalent(order, other)
    # but a child cannot run before the delegation, nor a thread out of order
    assert not w.equivalent(order, ["p:1", "c1:1", "p:2", "c2:1", "c2:2", "c1:2", "c1:3", "p:3"])
    assert not w.equivalent(order, ["p:1", "p:2", "c1:2", "c1:1", "c2:1", "c2:2", "c1:3", "p:3"])
    # orders that are not linearizations are compared pair by pair
    bad_a = ["p:2", "p:1", "c1:1", "c2:1"]
    assert w.equivalent(bad_a, ["p:2", "p:1", "c2:1", "c1:1"])
    assert not w.equivalent(bad_a, ["p:2", "c2:1", "p:1", "c1:1"])  # c2:1 follows p:1
    assert not w.equivalent(bad_a, ["p:1", "p:2", "c1:1", "c2:1"])
    assert not w.equivalent(bad_a, ["c1:1", "p:2", "p:1", "c2:1"])
    # different records are different traces; repeats and strangers are errors
    assert not w.equivalent(["p:1"], ["p:2"])
    assert not w.equivalent(["p:1", "p:2"], ["p:1"])
    with pytest.raises(ValueError, match="twice"):
        w.equivalent(["p:1", "p:1"], ["p:1", "p:1"])
    with pytest.raises(ValueError, match="no record"):
        w.equivalent(["p:1", "zz:1"], ["zz:1", "p:1"])


def test_linearize_a_subset_keeps_the_induced_order() -> None:
    w = delegation()
    # c2:2 and p:3 are linked only through records left out (c2:2 -> p:3 directly, c1:* via p:2)
    assert [r.id for r in w.linearize(["p:3", "c1:1", "p:1"])] == ["p:1", "c1:1", "p:3"]
    assert w.linearize([]) == []
    with pytest.raises(ValueError, match="no record"):
        w.linearize(["p:1", "q:1"])

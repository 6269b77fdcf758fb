"""FixedPoint: stable, cycle and max_iterations exits, and argument checks."""

from __future__ import annotations

import pytest

from airlock.weave import FixedPoint, FixedPointResult, detect_cycle, is_stable


def run(fp: FixedPoint, posts: list[str], start: str = "s0") -> list[FixedPointResult | None]:
    results, pre = [], start
    for post in posts:
        results.append(fp.observe(pre, post))
        pre = post
    return results


def test_stable_at_iteration_k() -> None:
    fp = FixedPoint()
    results = run(fp, ["h1", "h2", "h3", "h3"])
    assert results[:3] == [None, None, None]
    assert results[3] == FixedPointResult(exit="stable", iterations=4, chosen=3)
    assert fp.result == results[3] and fp.iterations == 4
    assert is_stable("x", "x") and not is_stable("x", "y")


def test_a_cycle_collapses_to_its_first_state() -> None:
    fp = FixedPoint()
    assert run(fp, ["A", "B", "A"]) == [None, None, FixedPointResult(exit="cycle", iterations=3, chosen=0)]
    fp = FixedPoint()
    assert run(fp, ["X", "A", "B", "A"])[-1] == FixedPointResult(exit="cycle", iterations=4, chosen=1)


def test_the_window_bounds_how_far_back_a_repeat_counts() -> None:
    assert run(FixedPoint(window=2), ["A", "B", "A", "B"]) == [None] * 4
    assert run(FixedPoint(window=3), ["A", "B", "C", "A"]) == [None] * 4
    found = run(FixedPoint(window=4), ["A", "B", "C", "A"])[-1]
    assert found == FixedPointResult(exit="cycle", iterations=4, chosen=0)


def test_max_iterations_chooses_the_last_iteration() -> None:
    fp = FixedPoint(max_iterations=3)
    assert run(fp, ["a", "b", "c"]) == [
        None,
        None,
        FixedPointResult(exit="max_iterations", iterations=3, chosen=2),
    ]
    assert run(FixedPoint(max_iterations=1), ["a"]) == [
        FixedPointResult(exit="max_iterations", iterations=1, chosen=0)
    ]
    # a stable last iteration is stable, not spent
    assert run(FixedPoint(max_iterations=2), ["a", "a"])[-1] == FixedPointResult(
        exit="stable", iterations=2, chosen=1
    )


def test_observing_after_the_end_is_an_error() -> None:
    fp = FixedPoint()
    run(fp, ["a", "a"])
    with pytest.raises(RuntimeError, match="stable"):
        fp.observe("a", "b")


def test_detect_cycle() -> None:
    assert detect_cycle([]) is None
    assert detect_cycle(["a"]) is None
    assert detect_cycle(["a", "b", "a"]) == 0
    assert detect_cycle(["a", "b", "a"], window=2) is None
    assert detect_cycle(["a", "b", "c", "a"]) is None
    assert detect_cycle(["a", "b", "c", "a"], window=4) == 0
    assert detect_cycle(["x", "a", "a"]) == 1
    assert detect_cycle(["a", "a", "b", "a"]) == 1  # the nearest earlier occurrence
    assert detect_cycle(["a", "b", "a", "c"]) is None  # only the last hash counts


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_iterations": -3}, "max_iterations"),
        ({"window": 1}, "window"),
        ({"window": 0}, "window"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FixedPoint(**kwargs)


def test_detect_cycle_refuses_a_window_below_two() -> None:
    with pytest.raises(ValueError, match="window"):
        detect_cycle(["a", "a"], window=1)

"""FairQueue: round-robin over keys, FIFO within a key, busy sessions wait."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from airlock.controller import FairQueue, QueuedJob


def _drain(queue: FairQueue, busy: frozenset[str] = frozenset()) -> list[str]:
    order = []
    while (job := queue.pop(busy)) is not None:
        order.append(job.id)
    return order


def test_keys_take_turns_and_each_key_is_fifo() -> None:
    queue = FairQueue()
    for i in range(4):
        queue.push(QueuedJob(f"a{i}", "a"))
    for i in range(2):
        queue.push(QueuedJob(f"b{i}", "b"))
    queue.push(QueuedJob("c0", "c"))
    assert len(queue) == 7 and "a0" in queue
    assert _drain(queue) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]
    assert len(queue) == 0


def test_busy_session_waits_and_keeps_its_order() -> None:
    queue = FairQueue()
    queue.push(QueuedJob("s1", "a", session="s"))
    queue.push(QueuedJob("s2", "a", session="s"))
    queue.push(QueuedJob("x", "a"))
    assert queue.pop(frozenset({"s"})) == QueuedJob("x", "a")
    assert queue.pop(frozenset({"s"})) is None
    assert _drain(queue) == ["s1", "s2"]


def test_remove_and_duplicate_push() -> None:
    queue = FairQueue()
    queue.push(QueuedJob("a", "k"))
    queue.push(QueuedJob("a", "k"))
    queue.push(QueuedJob("b", "k"))
    assert queue.remove("a") and not queue.remove("a")
    assert _drain(queue) == ["b"]


@given(st.lists(st.sampled_from("abc"), max_size=40))
def test_every_job_comes_out_once_and_keys_stay_fifo(keys: list[str]) -> None:
    queue = FairQueue()
    for i, key in enumerate(keys):
        queue.push(QueuedJob(f"{key}{i}", key))
    order = _drain(queue)
    assert sorted(order) == sorted(f"{k}{i}" for i, k in enumerate(keys))
    for key in "abc":
        mine = [int(j[1:]) for j in order if j[0] == key]
        assert mine == sorted(mine)
    # Fairness: while several keys have jobs, no key gets two turns in a row.
    remaining = {k: keys.count(k) for k in "abc"}
    for prev, nxt in itertools.pairwise(order):
        remaining[prev[0]] -= 1
        if prev[0] == nxt[0]:
            assert all(n == 0 for k, n in remaining.items() if k != prev[0])

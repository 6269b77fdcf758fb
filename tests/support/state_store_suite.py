"""The ``layer0.StateStore`` conformance suite: every store runs these tests unchanged.

A module that runs it imports them (``from tests.support.state_store_suite import *``) and
defines two fixtures: ``make_store``, a factory of stores whose ``shares`` attribute says
whether two of its stores see each other's writes (one file, one database), and ``store``.
The in-memory and file stores run it in tests/unit/state; SQLite and PostgreSQL in
tests/integration/store.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from layer0 import Scope, SearchResult, StateError, StateReader, StateStore, read_only

S1 = Scope.session("s1")
S2 = Scope.session("s2")
ALL_SCOPES = [
    Scope.session("s1"),
    Scope.workflow("s1"),
    Scope.agent("s1", "s1"),
    Scope.global_(),
    Scope.custom("s1"),
    Scope.custom(""),
    Scope.custom("../.."),
    Scope.session("a/b"),
    Scope.custom("日本 ☃"),
]


Factory = Callable[[], Awaitable[StateStore]]


async def test_is_a_state_store_and_reader(store: StateStore) -> None:
    assert isinstance(store, StateStore)
    assert isinstance(store, StateReader)


async def test_missing_key_reads_none(store: StateStore) -> None:
    assert await store.read(S1, "nope") is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2**70,
        1.5,
        "",
        'héllo \u2603 \n"q"',
        "日本語 \U0001f600 \u00e9\u0301 \ufeff \U0010ffff",
        "nul \x00 inside a value, escaped in its JSON",
        "100% _like_ \\ 'quoted' ? %s",
        [],
        [1, "a", None],
        {},
        {"b": {"a": [1.25]}, "ключ": "значение"},
    ],
)
async def test_write_then_read_round_trips_json(store: StateStore, value: Any) -> None:
    await store.write(S1, "k", value)
    assert await store.read(S1, "k") == value


async def test_overwrite_replaces_value(store: StateStore) -> None:
    await store.write(S1, "k", {"v": 1})
    await store.write(S1, "k", {"v": 2})
    assert await store.read(S1, "k") == {"v": 2}
    assert await store.list(S1, "") == ["k"]


async def test_read_returns_a_copy(store: StateStore) -> None:
    await store.write(S1, "k", {"items": [1]})
    got = await store.read(S1, "k")
    got["items"].append(2)
    assert await store.read(S1, "k") == {"items": [1]}


async def test_delete(store: StateStore) -> None:
    await store.write(S1, "k", 1)
    await store.delete(S1, "k")
    assert await store.read(S1, "k") is None
    assert await store.list(S1, "") == []


async def test_delete_missing_is_a_noop(store: StateStore) -> None:
    await store.delete(S1, "never-written")
    await store.delete(Scope.custom("never-used"), "x")
    assert await store.list(S1, "") == []


async def test_list_by_prefix_sorted(store: StateStore) -> None:
    keys = ["notes/b", "notes/a", "note", "todo", "notes/sub/c", "Notes"]
    for k in keys:
        await store.write(S1, k, k)
    assert await store.list(S1, "notes/") == ["notes/a", "notes/b", "notes/sub/c"]
    assert await store.list(S1, "note") == ["note", "notes/a", "notes/b", "notes/sub/c"]
    assert await store.list(S1, "zzz") == []
    assert await store.list(S1, "") == sorted(keys)


async def test_empty_prefix_lists_all_and_unicode_sorts_by_code_point(store: StateStore) -> None:
    keys = [
        "é",
        "z",
        "a",
        "日本",
        "Z",
        "a b",
        "a%2Fb",
        "a.json",
        "a.d",
        "B",
        "_",
        "-",
        "a_b",
        "ab",
        "\U0001f600",
    ]
    for k in keys:
        await store.write(S1, k, 1)
    assert await store.list(S1, "") == sorted(keys)  # Python sorts str by code point
    for k in keys:
        assert await store.read(S1, k) == 1


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("a%", ["a%", "a%b"]),
        ("a_", ["a_", "a_b"]),
        ("\ud7ff", ["\ud7ff", "\ud7ffx"]),
        ("\U0010ffff", ["\U0010ffff", "\U0010ffffa", "\U0010ffff\U0010ffff"]),
        ("日", ["日", "日本"]),
    ],
    ids=["percent", "underscore", "before-surrogates", "last-code-point", "cjk"],
)
async def test_a_prefix_lists_exactly_its_keys(store: StateStore, prefix: str, expected: list[str]) -> None:
    keys = ["a", "a%", "a%b", "a_", "a_b", "ab", "\ud7ff", "\ud7ffx", "\ue000", "日", "日本", "旦"]
    keys += ["\U0010ffff", "\U0010ffff\U0010ffff", "\U0010ffffa", "\U0010fffe"]
    for k in keys:
        await store.write(S1, k, 1)
    assert await store.list(S1, prefix) == expected


async def test_list_of_unused_scope_is_empty(store: StateStore) -> None:
    assert await store.list(Scope.workflow("w-unused"), "") == []


async def test_scopes_are_isolated(store: StateStore) -> None:
    for i, scope in enumerate(ALL_SCOPES):
        await store.write(scope, "k", i)
    for i, scope in enumerate(ALL_SCOPES):
        assert await store.read(scope, "k") == i
        assert await store.list(scope, "") == ["k"]
    await store.delete(ALL_SCOPES[0], "k")
    assert await store.read(ALL_SCOPES[0], "k") is None
    assert [await store.read(s, "k") for s in ALL_SCOPES[1:]] == list(range(1, len(ALL_SCOPES)))


async def test_64_concurrent_writes_all_land(store: StateStore) -> None:
    await asyncio.gather(*(store.write(S1, f"k{i:02d}", {"i": i}) for i in range(64)))
    assert await store.list(S1, "k") == [f"k{i:02d}" for i in range(64)]
    values = await asyncio.gather(*(store.read(S1, f"k{i:02d}") for i in range(64)))
    assert values == [{"i": i} for i in range(64)]


async def test_concurrent_writes_to_one_key_leave_one_whole_value(store: StateStore) -> None:
    await asyncio.gather(*(store.write(S1, "same", {"i": i, "pad": "x" * 1000}) for i in range(32)))
    value = await store.read(S1, "same")
    assert value["pad"] == "x" * 1000 and 0 <= value["i"] < 32


async def test_two_stores_on_one_database_see_each_others_writes(make_store: Factory) -> None:
    if not make_store.shares:  # type: ignore[attr-defined]
        return  # in-memory stores are each their own (the test below checks that too)
    a, b = await make_store(), await make_store()
    await a.write(S1, "from-a", {"by": "a"})
    assert await b.read(S1, "from-a") == {"by": "a"}
    await b.write(S1, "from-a", {"by": "b"})
    assert await a.read(S1, "from-a") == {"by": "b"}
    await b.delete(S1, "from-a")
    assert await a.read(S1, "from-a") is None
    await a.write(S2, "needle", "a haystack")
    assert [r.key for r in await b.search(S2, "HAYSTACK", 5)] == ["needle"]


async def test_concurrent_writes_from_two_instances(make_store: Factory) -> None:
    a, b = await make_store(), await make_store()
    await asyncio.gather(
        *(a.write(S1, f"a{i}", i) for i in range(32)), *(b.write(S1, f"b{i}", i) for i in range(32))
    )
    both = 64 if make_store.shares else 32  # type: ignore[attr-defined]
    assert len(await a.list(S1, "")) == both
    assert len(await b.list(S1, "")) == both


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        (1, 2),
        b"bytes",
        object(),
        math.nan,
        math.inf,
        {"ok": [1, {"bad": -math.inf}]},
        {1: "int key"},
        {"nested": {None: 1}},
    ],
    ids=["set", "tuple", "bytes", "object", "nan", "inf", "nested-inf", "int-key", "none-key"],
)
async def test_non_json_values_rejected(store: StateStore, value: Any) -> None:
    with pytest.raises(StateError) as info:
        await store.write(S1, "k", value)
    assert info.value.kind == "serialization"
    assert await store.read(S1, "k") is None


@pytest.mark.parametrize("key", ["", "nul\x00byte", "\ud800"], ids=["empty", "nul", "lone-surrogate"])
async def test_invalid_keys_rejected_everywhere(store: StateStore, key: str) -> None:
    ops = [store.write(S1, key, 1), store.read(S1, key), store.delete(S1, key)]
    for op in [*ops, store.list(S1, key)] if key else ops:  # "" is the prefix of every key
        with pytest.raises(StateError) as info:
            await op
        assert info.value.kind == "serialization"


async def test_search_finds_ranks_and_limits(store: StateStore) -> None:
    await store.write(S1, "both", {"text": "The quick brown FOX jumps"})
    await store.write(S1, "fox-twice", "fox and another fox")
    await store.write(S1, "one", "a quick note")
    await store.write(S1, "none", "nothing relevant here")
    await store.write(S2, "other-scope", "quick fox")
    results = await store.search(S1, "quick fox", 10)
    assert all(isinstance(r, SearchResult) for r in results)
    assert [r.key for r in results] == ["both", "fox-twice", "one"]
    assert [r.score for r in results] == [1.0, 0.5, 0.5]
    assert results[0].snippet is not None and "quick" in results[0].snippet
    assert [r.key for r in await store.search(S1, "quick fox", 1)] == ["both"]
    assert await store.search(S1, "quick fox", 0) == []
    assert await store.search(S1, "   ", 5) == []
    assert await store.search(S1, "absent", 5) == []
    assert await store.search(Scope.global_(), "fox", 5) == []


async def test_search_is_case_insensitive_and_snippets_long_values(store: StateStore) -> None:
    await store.write(S1, "long", "x" * 200 + " Needle " + "y" * 200)
    await store.write(S1, "unicode", "Überraschung: ÄÖÜ")
    (hit,) = await store.search(S1, "NEEDLE", 5)
    assert hit.key == "long" and hit.score == 1.0
    assert hit.snippet is not None
    assert "Needle" in hit.snippet and hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 120
    assert [r.key for r in await store.search(S1, "äöü", 5)] == ["unicode"]


async def test_read_only_view_cannot_write(store: StateStore) -> None:
    await store.write(S1, "k", "v")
    view = read_only(store)
    assert isinstance(view, StateReader)
    assert not isinstance(view, StateStore)
    assert not hasattr(view, "write") and not hasattr(view, "delete")
    assert await view.read(S1, "k") == "v"
    assert await view.list(S1, "") == ["k"]
    assert [r.key for r in await view.search(S1, "v", 3)] == ["k"]

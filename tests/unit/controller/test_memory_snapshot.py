"""The state snapshot a sandbox receives carries, besides the session's history (unchanged), the
memory its turn may read: every key of the session's scope and of the global scope, bounded."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox import StateEntry, state_snapshot
from airlock.spec import HISTORY_KEY
from airlock.state import SqliteStore
from layer0 import EnvError, Scope, SessionId, TurnInput

S = Scope.session("s1")
G = Scope.global_()


async def sqlite(tmp_path: Path, values: list[tuple[Scope, str, Any]]) -> SqliteStore:
    store = SqliteStore(tmp_path / "state.db")
    await store.__aenter__()
    for scope, key, value in values:
        await store.write(scope, key, value)
    return store


async def test_the_history_first_then_the_session_memory_then_the_global(tmp_path: Path) -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    store = await sqlite(
        tmp_path,
        [
            (G, "rule", "be brief"),
            (S, "b", {"x": 1}),
            (S, HISTORY_KEY, history),
            (S, "a", [1, 2]),
            (Scope.session("other"), "secret", "not yours"),
            (Scope.custom("tenant"), "k", 1),
        ],
    )
    try:
        entries = await state_snapshot(store, TurnInput.new("x", session=SessionId("s1")))
    finally:
        await store.aclose()
    assert entries == (
        StateEntry(S, HISTORY_KEY, history),  # exactly as before
        StateEntry(S, "a", [1, 2]),
        StateEntry(S, "b", {"x": 1}),
        StateEntry(G, "rule", "be brief"),
    )


async def test_only_the_scopes_the_agent_is_granted_are_sent(tmp_path: Path) -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    store = await sqlite(tmp_path, [(G, "rule", "be brief"), (S, "a", 1), (S, HISTORY_KEY, history)])
    session = TurnInput.new("x", session=SessionId("s1"))
    try:
        assert await state_snapshot(store, session, memory=("session",)) == (
            StateEntry(S, HISTORY_KEY, history),
            StateEntry(S, "a", 1),
        )
        assert await state_snapshot(store, session, memory=()) == (StateEntry(S, HISTORY_KEY, history),)
    finally:
        await store.aclose()


async def test_without_a_session_only_the_global_memory(tmp_path: Path) -> None:
    store = await sqlite(tmp_path, [(G, "rule", "be brief"), (S, "a", 1)])
    try:
        assert await state_snapshot(store, TurnInput.new("x")) == (StateEntry(G, "rule", "be brief"),)
    finally:
        await store.aclose()
    assert await state_snapshot(None, TurnInput.new("x", session=SessionId("s1"))) == ()


async def test_beyond_its_bounds_the_snapshot_keeps_what_fits_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await sqlite(
        tmp_path,
        [
            (S, HISTORY_KEY, ["h" * 500]),  # the history never counts
            (S, "a", "x" * 40),
            (S, "b", "y" * 200),  # too big for what is left: skipped
            (S, "c", "z" * 10),  # smaller: still fits
            (G, "d", 1),
            (G, "e", 2),  # over the entry limit
        ],
    )
    try:
        with caplog.at_level(logging.WARNING, logger="airlock.sandbox"):
            entries = await state_snapshot(
                store, TurnInput.new("x", session=SessionId("s1")), max_entries=3, max_bytes=100
            )
    finally:
        await store.aclose()
    assert [(e.scope, e.key) for e in entries] == [(S, HISTORY_KEY), (S, "a"), (S, "c"), (G, "d")]
    (record,) = caplog.records
    assert record.getMessage().startswith("2 memory entries (202 bytes read among them) left out")


async def test_a_failing_reader_is_an_environment_error_naming_the_scope(tmp_path: Path) -> None:
    store = await sqlite(tmp_path, [(G, "rule", "be brief")])
    await store.aclose()  # the store went away
    with pytest.raises(EnvError, match=r"cannot list the memory of the global scope: .* is closed"):
        await state_snapshot(store, TurnInput.new("x"))

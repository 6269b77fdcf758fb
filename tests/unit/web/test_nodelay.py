"""The API's connections send without Nagle: a kept-alive connection's response is not held
back for the client's delayed ACK (which cost every request after the first ~40 ms)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.nodelay import nodelay, recording

from .world import world

pytestmark = pytest.mark.timeout(60)


async def test_a_kept_alive_connection_has_tcp_nodelay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = recording(monkeypatch)
    async with world(tmp_path) as w, w.client("carol") as carol:
        for _ in range(2):
            assert (await carol.get("/api/v1/jobs")).status_code == 200
        (server,) = servers
        assert nodelay(server) == [True]

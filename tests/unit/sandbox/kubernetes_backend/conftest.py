"""Every test here fails if the backend asked the API server anything outside its access table.

:class:`~airlock.sandbox.kubernetes._api.KubeApi` refuses such a request before it is sent and
logs the refusal as an error; some callers swallow the exception (a port-forward relay, the
proxy log's thread, the warm pool's deadline backstop), so the log is what is checked.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from airlock.sandbox import PoolSettings, WarmPool

#: The logger of the access table's refusals.
ACCESS_LOGGER = "airlock.sandbox.kubernetes.access"


@pytest.fixture(autouse=True)
def every_request_is_in_the_access_table(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    refused = [
        r.getMessage()
        for phase in ("setup", "call")
        for r in caplog.get_records(phase)
        if r.name == ACCESS_LOGGER and r.levelno >= logging.ERROR
    ]
    assert not refused, "requests outside the access table:\n" + "\n".join(refused)


@pytest.fixture
async def pool() -> AsyncIterator[WarmPool[Any]]:
    """A warm pool of one sandbox, closed after the test."""
    p: WarmPool[Any] = WarmPool(PoolSettings(size=1), name="kubernetes")
    yield p
    await p.aclose()

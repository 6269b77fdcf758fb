"""LocalOrchestrator passes the layer0 Orchestrator conformance suite."""

from __future__ import annotations

import pytest

from airlock.testing import LocalOrchestrator
from layer0 import TurnError, TurnInput, TurnOutput
from tests.support.orchestrator_suite import *  # noqa: F403 - the conformance suite runs here
from tests.support.orchestrator_suite import ANSWER, BROKEN, ECHO


class _Answer:
    async def execute(self, input: TurnInput) -> TurnOutput:
        return TurnOutput.new(ANSWER)


class _Broken:
    async def execute(self, input: TurnInput) -> TurnOutput:
        raise TurnError.non_retryable("this turn always fails")


@pytest.fixture
def orch() -> LocalOrchestrator:
    local = LocalOrchestrator()
    local.register(ECHO, _Answer())
    local.register(BROKEN, _Broken())
    return local

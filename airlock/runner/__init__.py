"""The in-sandbox runner (gRPC server) and RemoteTurn, its client.

- :class:`RunnerServer` / :class:`RunnerConfig`: the server (``airlock-runner`` runs one).
- :class:`RemoteTurn`: a ``layer0.Turn`` that executes an AgentSpec on a runner.

The wire contract is ``protos/airlock/runner/v1/runner.proto`` and its converters are
:mod:`airlock.wire`; generated code lives in the private ``airlock._proto`` package and proto
types never appear in this package's API. This package never imports Docker.
"""

from airlock.wire import MalformedMessage

from ._client import RemoteTurn, RunnerCallError, RunnerEvent, StepInfo, TurnFinished, wait_until_serving
from ._server import DEFAULT_MAX_MESSAGE_BYTES, SERVICE_NAME, RunnerConfig, RunnerServer, TlsFiles

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "SERVICE_NAME",
    "MalformedMessage",
    "RemoteTurn",
    "RunnerCallError",
    "RunnerConfig",
    "RunnerEvent",
    "RunnerServer",
    "StepInfo",
    "TlsFiles",
    "TurnFinished",
    "wait_until_serving",
]

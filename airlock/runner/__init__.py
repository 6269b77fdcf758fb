"""The in-sandbox runner (gRPC server) and RemoteTurn, its client.

- :class:`RunnerServer` / :class:`RunnerConfig`: the server (``airlock-runner`` runs one).
- :class:`RemoteTurn`: a ``layer0.Turn`` that executes an AgentSpec on a runner.

The wire contract is ``protos/airlock/runner/v1/runner.proto`` and its converters are
:mod:`airlock.wire`; generated code lives in the private ``airlock._proto`` package and proto
types never appear in this package's API. This package never imports Docker.
"""

import typing as _typing  # as private names: this package exports exactly __all__

from airlock.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from airlock.wire import MalformedMessage

    from ._client import (
        RemoteTurn,
        RunnerCallError,
        RunnerEvent,
        StepInfo,
        TurnFinished,
        agent_refused,
        channel_lost,
        fence_breached,
        wait_until_serving,
    )
    from ._server import DEFAULT_MAX_MESSAGE_BYTES, SERVICE_NAME, RunnerConfig, RunnerServer, TlsFiles
    from ._transfer import Artifacts

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "SERVICE_NAME",
    "Artifacts",
    "MalformedMessage",
    "RemoteTurn",
    "RunnerCallError",
    "RunnerConfig",
    "RunnerEvent",
    "RunnerServer",
    "StepInfo",
    "TlsFiles",
    "TurnFinished",
    "agent_refused",
    "channel_lost",
    "fence_breached",
    "wait_until_serving",
]

#: Each name's module, loaded at its first use: ``python -m airlock.runner`` imports this
#: package first, and the client (pydantic, the turn's events) is no part of serving.
_WHERE = {
    "MalformedMessage": "airlock.wire",
    "Artifacts": "airlock.runner._transfer",
    **dict.fromkeys(
        (
            "RemoteTurn",
            "RunnerCallError",
            "RunnerEvent",
            "StepInfo",
            "TurnFinished",
            "agent_refused",
            "channel_lost",
            "fence_breached",
            "wait_until_serving",
        ),
        "airlock.runner._client",
    ),
    **dict.fromkeys(
        ("DEFAULT_MAX_MESSAGE_BYTES", "SERVICE_NAME", "RunnerConfig", "RunnerServer", "TlsFiles"),
        "airlock.runner._server",
    ),
}

if not _typing.TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any
    __getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)

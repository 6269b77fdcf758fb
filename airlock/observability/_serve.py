"""What ``airlock serve`` asks of this package: the log format, and metrics for its controller."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Literal

from ._http import serving_metrics
from ._logs import JsonFormatter
from ._metrics import Metrics

__all__ = ["LogFormat", "log_formatter", "serve_metrics"]

_log = logging.getLogger("airlock.observability")

#: ``airlock serve --log-format``.
LogFormat = Literal["text", "json"]


def log_formatter(log_format: LogFormat) -> logging.Formatter:
    """The process log's formatter: one JSON object a line, or ``time LEVEL logger: message``."""
    if log_format == "json":
        return JsonFormatter()
    return logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


@contextlib.asynccontextmanager
async def serve_metrics(address: str | None) -> AsyncIterator[Metrics]:
    """Metrics observing the core while the block runs (attach the controller's service to
    them), served at ``http://ADDRESS/metrics`` when an address is given (else for an HTTP
    server that mounts :func:`metrics_app`).

    Raises:
        ConfigError: the address is not ``HOST:PORT`` or cannot be bound.
    """
    metrics = Metrics()
    with metrics.observing():
        if address is None:
            yield metrics
            return
        async with serving_metrics(metrics, address) as where:
            _log.info("metrics on http://%s/metrics", where)
            yield metrics

"""airlock.observability: Prometheus metrics and JSON logs of a controller.

::

    metrics = Metrics()
    with metrics.observing():                      # the core's hooks report here
        async with Controller(config, options) as controller:
            metrics.attach(controller.service)     # job events, warm pools
            async with serving_metrics(metrics, "127.0.0.1:9464") as where:
                ...                                # or mount metrics_app(metrics) at /metrics

The families (``airlock_`` prefix, seconds, bounded labels) live on the metrics' own registry;
the job families come from the controller's job events (:class:`JobMetrics`), the pools'
counters from the pools at each scrape, the rest from the core's observer interfaces
(``airlock.controller.ControllerObserver``, ``airlock.sandbox.SandboxObserver``), which do
nothing until :meth:`Metrics.observing` installs these. :class:`JsonFormatter` writes the
process log as JSON lines.
"""

from ._census import JobCensus
from ._families import Families
from ._http import parse_address, serving_metrics
from ._jobs import JobMetrics
from ._logs import JsonFormatter, trace_id
from ._metrics import Metrics, metrics_app
from ._serve import LogFormat, log_formatter, serve_metrics

__all__ = [
    "Families",
    "JobCensus",
    "JobMetrics",
    "JsonFormatter",
    "LogFormat",
    "Metrics",
    "log_formatter",
    "metrics_app",
    "parse_address",
    "serve_metrics",
    "serving_metrics",
    "trace_id",
]

"""The controller's TracerProvider (the OpenTelemetry SDK: imported only when tracing is on)."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from ._ids import forced

#: The variables that turn OTLP export on (the standard ones).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def otlp_wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for OTLP trace export (an endpoint, or
    ``OTEL_TRACES_EXPORTER=otlp``); ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_SDK_DISABLED=true``
    turn it off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if "none" in exporters:
        return False
    return "otlp" in exporters or any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


class JobIdGenerator(IdGenerator):
    """Random ids, except for a job's span (see :func:`~._ids.job_ids`)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        ids = forced()
        return ids[1] if ids is not None else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        ids = forced()
        return ids[0] if ids is not None else self._random.generate_trace_id()


def tracer_provider(processor: SpanProcessor) -> TracerProvider:
    """A provider of the controller's own (never the global one) handing spans to ``processor``."""
    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "airlock-controller"}))
    provider = TracerProvider(resource=resource, id_generator=JobIdGenerator())
    provider.add_span_processor(processor)
    return provider


def otlp_provider(environ: Mapping[str, str]) -> TracerProvider:
    """A provider exporting over OTLP/HTTP to the endpoint ``environ`` names (the exporter reads
    its other settings, e.g. ``OTEL_EXPORTER_OTLP_HEADERS``, from the process environment)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_endpoint(environ))))


def traces_endpoint(environ: Mapping[str, str]) -> str | None:
    """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as is, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` plus
    ``/v1/traces``, else None (the exporter's default, ``http://localhost:4318/v1/traces``)."""
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else None

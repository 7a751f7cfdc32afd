"""Wiring for the OTLP branch (extra ``otlp``): http/protobuf, imported lazily."""

from __future__ import annotations

from opentelemetry.sdk.trace.export import SpanExporter

_TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """The traces URL for a base endpoint, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read (``/v1/traces`` appended)."""
    base = endpoint.rstrip("/")
    return base if base.endswith(_TRACES_PATH) else base + _TRACES_PATH


def otlp_span_exporter(endpoint: str | None) -> SpanExporter:
    """An OTLP http/protobuf exporter; ``endpoint=None`` leaves every setting to the ``OTEL_EXPORTER_OTLP_*``
    environment variables. Raises ``ImportError`` with an install hint when the extra is missing."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ImportError("OTLP export needs the 'otlp' extra: pip install 'otel-agentdiag[otlp]'") from exc
    if endpoint is None:
        return OTLPSpanExporter()
    return OTLPSpanExporter(endpoint=traces_url(endpoint))

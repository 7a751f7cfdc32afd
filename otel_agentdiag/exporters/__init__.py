"""Exporters: ``sqlite`` (the local store); OTLP wiring lives in ``otlp``."""

from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter

__all__ = ["SQLiteSpanExporter"]

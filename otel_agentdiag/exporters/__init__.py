"""Exporters: ``sqlite`` (the local store); OTLP wiring lives in ``otlp``, its retry policy in ``otlp_attempts``."""

from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter

__all__ = ["SQLiteSpanExporter"]

"""Exporters: ``sqlite`` (the local store); the OTLP wiring (one attempt per call) lives in ``otlp``."""

from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter

__all__ = ["SQLiteSpanExporter"]

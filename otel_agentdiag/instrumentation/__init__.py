"""Instrumentation: manual wrappers (``manual``) and, in later subpackages, auto-instrumentors.

Everything here depends only on the OpenTelemetry API and :mod:`otel_agentdiag.semconv`: spans carry raw
correlation IDs, which the redacting processor hashes before any exporter sees them.
"""

"""Instrumentation: manual wrappers (``manual``) and auto-instrumentors (``openai``, ``anthropic``).

Everything here depends only on the OpenTelemetry API and :mod:`otel_agentdiag.semconv`: spans carry raw
correlation IDs, which the redacting processor hashes before any exporter sees them.

:func:`llm_call_owned_by` is the one-owner-per-model-call mechanism: a span that already represents a model call
(a framework integration's) declares it, and the client instrumentors called inside enrich that span, or stay
silent, instead of starting a second LLM span.
"""

from otel_agentdiag.instrumentation._base import llm_call_owned_by

__all__ = ["llm_call_owned_by"]

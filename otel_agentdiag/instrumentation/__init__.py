"""Instrumentation: manual wrappers (``manual``), client instrumentors and framework integrations.

The client instrumentors are ``openai`` and ``anthropic``; the framework integrations ``openai_agents`` and
``langchain``. Everything here depends only on the OpenTelemetry API, :mod:`otel_agentdiag.semconv` and
``_internal/``: correlation ids and content go beside the span (``_internal/ids.py``, ``_internal/content.py``),
never on it, and the redacting processors hash the ids before any exporter sees them.

:func:`llm_call_owned_by` is the one-owner-per-model-call mechanism: a span that already represents a model call
(a framework integration's) declares it, and the client instrumentors called inside enrich that span, or stay
silent, instead of starting a second LLM span.
"""

from otel_agentdiag.instrumentation._base import llm_call_owned_by

__all__ = ["llm_call_owned_by"]

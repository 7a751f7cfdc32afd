"""Strands Agents (``strands-agents``) through its own OpenTelemetry output, given our tracer provider.

Usage::

    from otel_agentdiag.instrumentation.strands import StrandsInstrumentor

    StrandsInstrumentor().instrument()        # or instrument(tracer_provider=...)
    result = agent("What's the weather in Paris?")
    StrandsInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_strands``).

Strands traces every agent through one tracer, ``strands.telemetry.get_tracer()``, made from the global tracer
provider when first asked for. ``instrument()`` points that tracer at ours (the one ``configure()`` built, else
the global one) through its public ``tracer_provider`` and ``tracer`` attributes, so ``configure(set_global=False)``
works too; ``uninstrument()`` puts back what was there. The framework's spans (``invoke_agent {agent}``,
``execute_event_loop_cycle``, ``chat``, ``execute_tool {tool}``) are mapped by the GenAI adapter
(:mod:`otel_agentdiag.pipeline.adapters.genai`): run → iteration per cycle → LLM and tool spans. Its content
(span events with messages, ``gen_ai.tool.description``, ``gen_ai.agent.tools``, ...) is dropped by the
redactor, as every key it does not name. :mod:`.patch` wraps the tracer's ``start_*_span`` methods: each span
is numbered in its run's session (Strands sets ``session.id`` only after a span started), the names an agent
declares are registered, and cycles are numbered.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._provider import tracer_provider_in_use
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.strands.package import _instruments
from otel_agentdiag.instrumentation.strands.patch import CUSTOM_ATTRIBUTES_AT, CycleIndexes, span_start_wrapper

__all__ = ["StrandsInstrumentor"]

_logger = logging.getLogger(__name__)
_TRACER_NAME = "strands.telemetry.tracer"
"""The scope Strands' own tracer uses (its module's name)."""


class StrandsInstrumentor(Instrumentor):
    """Traces Strands agent runs: run → iteration per event-loop cycle → ``chat`` and ``execute_tool`` spans.

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one).
    """

    _previous: tuple[Any, Any, Any] | None = None
    _wrapped: tuple[tuple[str, Any], ...] = ()

    _instruments = _instruments

    def _instrument(self, **kwargs: Any) -> None:
        from strands.telemetry import Tracer, get_tracer  # type: ignore[import-not-found]

        provider = kwargs.get("tracer_provider") or tracer_provider_in_use() or trace.get_tracer_provider()
        strands_tracer = get_tracer()
        self._previous = (strands_tracer, strands_tracer.tracer_provider, strands_tracer.tracer)
        strands_tracer.tracer_provider = provider
        strands_tracer.tracer = provider.get_tracer(_TRACER_NAME)
        wrapped: list[tuple[str, Any]] = []
        try:
            indexes = CycleIndexes()
            for method in CUSTOM_ATTRIBUTES_AT:
                wrapper = span_start_wrapper(method, indexes)
                wrap_function_wrapper(Tracer, method, wrapper)
                wrapped.append((method, wrapper))
        except Exception as exc:  # noqa: BLE001 - an unknown layout: spans as Strands makes them, never a failure
            _logger.warning(
                "otel-agentdiag: Strands spans traced without sessions at start, names or cycle indexes (%s)",
                type(exc).__name__,
            )
            self._unwrap(Tracer, wrapped)
        else:
            self._wrapped = tuple(wrapped)

    def _uninstrument(self, **kwargs: Any) -> None:
        from strands.telemetry import Tracer  # type: ignore[import-not-found]

        previous, self._previous = self._previous, None
        if previous is not None:
            strands_tracer, provider, tracer = previous
            strands_tracer.tracer_provider = provider
            strands_tracer.tracer = tracer
        wrapped, self._wrapped = self._wrapped, ()
        self._unwrap(Tracer, wrapped)

    @staticmethod
    def _unwrap(tracer_class: Any, wrapped: Any) -> None:
        for name, wrapper in reversed(list(wrapped)):
            unwrap_ours(tracer_class, name, wrapper)

"""Auto-instrumentation of CrewAI (``crewai``) through the events its event bus emits.

Usage::

    from otel_agentdiag.instrumentation.crewai import CrewAIInstrumentor
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor   # optional: HTTP attempts, response model

    CrewAIInstrumentor().instrument()          # or instrument(tracer_provider=...)
    crew.kickoff()                             # or await crew.kickoff_async() / crew.akickoff()
    CrewAIInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_crewai``).

Each agent doing a task becomes ``invoke_agent {role}`` → ``agent.iteration`` per turn of its loop → ``chat
{model}`` and ``execute_tool {tool}``; see :mod:`.events` for the whole mapping. With our OpenAI (or Anthropic)
instrumentation on too, the client call enriches CrewAI's model-call span: one span per call.

**Why the bus's ``emit``, and not a listener or the methods.** CrewAI's listeners (``crewai_event_bus.on``) run
on a thread pool after the event was emitted, in a copy of the context: too late to make a model call's span the
one our client instrumentation enriches, and in no order across threads. Wrapping ``Agent.execute_task``, the
executor's flow methods and the tools would follow CrewAI's internals, which change from release to release
(the executor became a ``Flow`` in 1.x; native tool calls run on a thread pool). ``instrument()`` wraps one public
method, ``CrewAIEventsBus.emit``: every event is read on the emitting thread, in the emitting context, after the
bus gave it its ids. Parents come from those ids (CrewAI keeps its scope stack in a ``ContextVar``), so two
crews under ``asyncio.gather`` (``kickoff_async`` runs ``kickoff`` in a thread with a copy of the context; the
executor's flow and the tool pool copy it again) land in two separate, correct trees.

**CrewAI's own telemetry.** CrewAI 1.15 sends anonymous usage telemetry through a ``TracerProvider`` of its own
(never the global one, never ours; it does not make its spans current) and, when enabled, uploads traces to its
service from a listener. Neither is ours to trace or to stop: set ``CREWAI_DISABLE_TELEMETRY=true``,
``CREWAI_DISABLE_TRACKING=true`` and ``CREWAI_TRACING_ENABLED=false`` in the environment for no traffic to
CrewAI's services.

**Conversations.** CrewAI has no conversation id (``Crew.id`` names the crew object, not a conversation): a run
carries the one of the context it starts in (an enclosing ``agentdiag.agent_run``), else none.
"""

from __future__ import annotations

import logging
from typing import Any

from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._provider import tracer_for
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.crewai.events import CrewAISpans
from otel_agentdiag.instrumentation.crewai.package import _instruments

__all__ = ["CrewAIInstrumentor", "CrewAISpans"]

_logger = logging.getLogger(__name__)


class CrewAIInstrumentor(Instrumentor):
    """Traces CrewAI crews and agents as OpenTelemetry GenAI spans (idempotent, reversible).

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one).
    """

    _spans: CrewAISpans | None = None
    _wrapper: Any = None
    """The one bound ``emit_wrapper`` put on the bus (``unwrap_ours`` finds it by identity)."""

    _instruments = _instruments

    @property
    def spans(self) -> CrewAISpans | None:
        """The span table while instrumented."""
        return self._spans

    def _instrument(self, **kwargs: Any) -> None:
        from crewai.events.event_bus import CrewAIEventsBus  # type: ignore[import-not-found,unused-ignore]
        from crewai.events.event_context import (  # type: ignore[import-not-found,unused-ignore]
            SCOPE_ENDING_EVENTS,
            SCOPE_STARTING_EVENTS,
        )

        spans = CrewAISpans(
            tracer_for(__name__, kwargs.get("tracer_provider")),
            starts=SCOPE_STARTING_EVENTS,
            ends=SCOPE_ENDING_EVENTS,
        )
        wrapper = spans.emit_wrapper
        try:
            wrap_function_wrapper(CrewAIEventsBus, "emit", wrapper)
        except Exception as exc:  # noqa: BLE001 - an unknown layout: CrewAI runs untraced, never a failure
            _logger.warning("otel-agentdiag: cannot instrument crewai (%s); it stays untraced", type(exc).__name__)
            return
        self._spans, self._wrapper = spans, wrapper

    def _uninstrument(self, **kwargs: Any) -> None:
        spans, wrapper = self._spans, self._wrapper
        self._spans = self._wrapper = None
        if spans is None:
            return
        from crewai.events.event_bus import CrewAIEventsBus  # type: ignore[import-not-found,unused-ignore]

        unwrap_ours(CrewAIEventsBus, "emit", wrapper)
        open_spans = spans.close()
        if open_spans:
            _logger.warning("otel-agentdiag: ended %d CrewAI spans still open at uninstrument()", open_spans)

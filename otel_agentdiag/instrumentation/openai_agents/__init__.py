"""Auto-instrumentation of the OpenAI Agents SDK (``openai-agents``) through its public tracing API.

Usage::

    from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument()      # or instrument(tracer_provider=..., keep_sdk_processors=True)
    result = await Runner.run(agent, "What's the weather in Paris?", run_config=RunConfig(group_id=thread_id))
    OpenAIAgentsInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_openai_agents``).

The instrumentor registers an :class:`~otel_agentdiag.instrumentation.openai_agents.processor.AgentDiagTracingProcessor`
with ``agents.set_trace_processors()`` (replacing the SDK's own processors, which export every trace, content
included, to OpenAI's tracing backend) or, with ``keep_sdk_processors=True`` or
``AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS=true``, with ``agents.add_trace_processor()`` next to them. Every run
becomes ``invoke_agent {agent}`` → ``agent.iteration`` per turn → ``chat {model}`` / ``execute_tool {tool}``;
see :mod:`.processor` for the whole mapping.

Use it with :class:`~otel_agentdiag.instrumentation.openai.OpenAIInstrumentor` to get the HTTP attempts and the
API's own response details: the client instrumentation then *enriches* the Agents SDK's model-call span (one span
per call), it does not start a second one.

The SDK's ``RunConfig(tracing_disabled=True)`` (or ``OPENAI_AGENTS_DISABLE_TRACING``) switches the spans off too;
``RunConfig(tracing={"include_task_and_turn_spans": False})`` leaves out the iteration spans (each agent span is
then a run span of its own).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from otel_agentdiag.environment_variables import AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS, parse_bool
from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._provider import tracer_for
from otel_agentdiag.instrumentation.openai_agents.package import _instruments
from otel_agentdiag.instrumentation.openai_agents.processor import AgentDiagTracingProcessor

__all__ = ["AgentDiagTracingProcessor", "OpenAIAgentsInstrumentor"]

_logger = logging.getLogger(__name__)


def _current_processors() -> list[Any] | None:
    """The SDK's registered processors, to restore them on ``uninstrument()``. The SDK has no public getter;
    ``None`` when its internals differ (then its default processor is restored)."""
    try:
        from agents.tracing import get_trace_provider

        processors = get_trace_provider()._multi_processor._processors  # type: ignore[attr-defined]
        return list(processors)
    except Exception:  # noqa: BLE001 - a best-effort read of SDK internals
        return None


class OpenAIAgentsInstrumentor(Instrumentor):
    """Traces OpenAI Agents SDK runs as OpenTelemetry GenAI spans.

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one) and ``keep_sdk_processors`` (default ``False``, or ``AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS``).
    """

    _processor: AgentDiagTracingProcessor | None = None
    _previous: list[Any] | None = None
    _kept = False

    _instruments = _instruments

    @property
    def processor(self) -> AgentDiagTracingProcessor | None:
        """The registered processor while instrumented."""
        return self._processor

    def _instrument(self, **kwargs: Any) -> None:
        from agents.tracing import add_trace_processor, set_trace_processors

        keep = kwargs.get("keep_sdk_processors")
        if keep is None:
            name = AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS
            keep = parse_bool(name, os.environ.get(name), default=False)
        processor = AgentDiagTracingProcessor(tracer_for(__name__, kwargs.get("tracer_provider")))
        self._kept = bool(keep)
        if keep:
            self._previous = None
            add_trace_processor(processor)
        else:
            self._previous = _current_processors()
            set_trace_processors([processor])
        self._processor = processor

    def _uninstrument(self, **kwargs: Any) -> None:
        processor, self._processor = self._processor, None
        if processor is None:
            return
        open_spans = processor.close()
        if open_spans:
            _logger.warning("otel-agentdiag: ended %d Agents SDK spans still open at uninstrument()", open_spans)
        from agents.tracing import set_trace_processors

        previous, self._previous = self._previous, None
        if not self._kept:
            if previous is None:
                from agents.tracing.processors import default_processor

                previous = [default_processor()]
            set_trace_processors(previous)
            return
        # Registered next to the SDK's processors: drop ours, keep theirs. Without a way to list them, the
        # closed processor stays registered and ignores every span.
        remaining = _current_processors()
        if remaining is not None:
            set_trace_processors([p for p in remaining if p is not processor])

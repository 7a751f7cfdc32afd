"""Auto-instrumentation of LlamaIndex's workflow agents through LlamaIndex's own instrumentation dispatcher.

Covers ``FunctionAgent``, ``ReActAgent``, ``CodeActAgent`` and ``AgentWorkflow`` (llama-index-core 0.14), and any
LLM or tool call LlamaIndex makes.

Usage::

    from otel_agentdiag.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument()      # or instrument(tracer_provider=...)
    response = await agent.run(user_msg="Weather in Paris?")
    LlamaIndexInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_llama_index``).

The instrumentor adds one span handler and one event handler to LlamaIndex's root dispatcher
(``llama_index.core.instrumentation.get_dispatcher()``: the public hook LlamaIndex's own observability
integrations use), and removes them again. Every agent run becomes ``invoke_agent {agent}`` → ``agent.iteration``
per ``run_agent_step`` → ``chat {model}`` / ``execute_tool {tool}``; see :mod:`.handler` for the whole mapping.
The agent's and its tools' names come from their definitions and are registered (code, not data).

Why not OpenInference's LlamaIndex instrumentor mapped by the adapter: it reports the same dispatcher spans one to
one, so an agent run is a ``CHAIN`` (no run), one model call is three ``LLM`` spans (``_prepare_chat_with_tools``,
``achat`` and the inner ``chat``), and the tool calls are siblings of the model turn (no iteration); the adapter,
which sees one span at a time, cannot rebuild the tree from that.
"""

from __future__ import annotations

import logging
from typing import Any

from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation.llama_index.package import _instruments

__all__ = ["LlamaIndexInstrumentor"]

_logger = logging.getLogger(__name__)


class LlamaIndexInstrumentor(Instrumentor):
    """Traces LlamaIndex agent runs as OpenTelemetry GenAI spans.

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one).
    """

    _handlers: tuple[Any, Any] | None = None

    _instruments = _instruments

    @property
    def span_handler(self) -> Any:
        """The span handler on LlamaIndex's root dispatcher while instrumented (None otherwise)."""
        return None if self._handlers is None else self._handlers[0]

    def _instrument(self, **kwargs: Any) -> None:
        from llama_index_instrumentation import get_dispatcher

        from otel_agentdiag.instrumentation.llama_index.handler import AgentDiagEventHandler, AgentDiagSpanHandler

        spans = AgentDiagSpanHandler(tracer_provider=kwargs.get("tracer_provider"))
        assert spans.table is not None
        events = AgentDiagEventHandler(spans.table)
        root = get_dispatcher()
        root.add_span_handler(spans)
        root.add_event_handler(events)
        self._handlers = (spans, events)

    def _uninstrument(self, **kwargs: Any) -> None:
        handlers, self._handlers = self._handlers, None
        if handlers is None:
            return
        spans, events = handlers
        # On failure the closed handlers below ignore every later notification.
        with handle_internal_errors("removing the LlamaIndex handlers"):
            from llama_index_instrumentation import get_dispatcher

            root = get_dispatcher()
            root.span_handlers[:] = [h for h in root.span_handlers if h is not spans]
            root.event_handlers[:] = [h for h in root.event_handlers if h is not events]
        table = spans.table
        spans.close()
        events.close()
        open_spans = table.close() if table is not None else 0
        if open_spans:
            _logger.warning("otel-agentdiag: ended %d LlamaIndex spans still open at uninstrument()", open_spans)

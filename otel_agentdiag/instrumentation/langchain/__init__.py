"""Auto-instrumentation of LangChain and LangGraph through LangChain's public callback system.

Covers ``create_agent``, ``create_react_agent`` and any graph or chain.

Usage::

    from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument()      # or instrument(tracer_provider=...)
    agent.invoke({"messages": [("user", "Weather in Paris?")]}, config={"configurable": {"thread_id": thread_id}})
    LangChainInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_langchain``); or, for
one run only, without the instrumentor: ``config={"callbacks": [AgentDiagCallbackHandler()]}``.

The instrumentor attaches one
:class:`~otel_agentdiag.instrumentation.langchain.callback.AgentDiagCallbackHandler` to every LangChain run, in
every thread and task, through ``langchain_core.tracers.context.register_configure_hook`` (the hook LangChain's
own tracers use); child runs inherit it, so each step is reported once, also when the same handler is passed in
``callbacks=``. Every agent run becomes ``invoke_agent {agent}`` → ``agent.iteration`` per LangGraph step →
``chat {model}`` / ``execute_tool {tool}``; see :mod:`.callback` for the whole mapping.

Names: a LangGraph graph's own name (``compile(name=...)``, ``create_agent(name=...)``) is code, and the
instrumentor registers it as an agent name when the graph runs (``Pregel.stream``/``astream``, which every
``invoke``, ``stream`` and ``astream_events`` goes through, are wrapped to read it from the graph object), if it
passes the public-safety check. A per-call ``run_name`` is data: the run's span carries it, and the redactor
exports it as ``_OTHER`` unless the same name is registered.

Use it with :class:`~otel_agentdiag.instrumentation.openai.OpenAIInstrumentor` (or the Anthropic one) to get the
HTTP attempts and the API's own response details: the client instrumentation then *enriches* LangChain's
model-call span (one span per call), it does not start a second one.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from wrapt import wrap_function_wrapper

from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.langchain.callback import AgentDiagCallbackHandler
from otel_agentdiag.instrumentation.langchain.package import _instruments

__all__ = ["AgentDiagCallbackHandler", "LangChainInstrumentor"]

_logger = logging.getLogger(__name__)


def _remove_hook(var: ContextVar[Any]) -> None:
    """Unregister the configure hook of ``var``. LangChain has no public way to do it: filter its private list
    (in place). Should the list move, the closed handler stays registered and ignores every run."""
    with handle_internal_errors("removing the LangChain callback hook"):  # a best-effort edit of LangChain internals
        from langchain_core.tracers import context as lc_context

        hooks = getattr(lc_context, "_configure_hooks", None)
        if isinstance(hooks, list):
            hooks[:] = [hook for hook in hooks if not (isinstance(hook, tuple) and hook and hook[0] is var)]


def _graph_methods() -> list[tuple[type, str]]:
    """The methods every run of a LangGraph graph goes through (none without LangGraph: chains only)."""
    try:
        from langgraph.pregel import Pregel
    except ImportError:
        return []
    return [(Pregel, "stream"), (Pregel, "astream")]


def _register_graph_name(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Register the graph's own name (a definition: code) before its run starts, then run it unchanged."""
    with handle_internal_errors("registering a LangGraph graph's name"):
        default_registry.register_valid("agent", (getattr(instance, "name", None),))
    return wrapped(*args, **kwargs)


class LangChainInstrumentor(Instrumentor):
    """Traces LangChain and LangGraph runs as OpenTelemetry GenAI spans.

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one).
    """

    _handler: AgentDiagCallbackHandler | None = None
    _var: ContextVar[Any] | None = None
    _wrapped: tuple[tuple[type, str], ...] = ()

    _instruments = _instruments

    @property
    def handler(self) -> AgentDiagCallbackHandler | None:
        """The handler attached to every run while instrumented."""
        return self._handler

    def _instrument(self, **kwargs: Any) -> None:
        from langchain_core.tracers.context import register_configure_hook

        handler = AgentDiagCallbackHandler(tracer_provider=kwargs.get("tracer_provider"))
        # A default (not a set value) is seen by every thread and task; inheritable: child runs get it too, and
        # LangChain adds a handler only once per run (by identity).
        var: ContextVar[Any] = ContextVar("otel_agentdiag_langchain_handler", default=handler)
        register_configure_hook(var, inheritable=True)
        self._handler, self._var = handler, var
        wrapped = []
        for cls, method in _graph_methods():
            # A LangGraph layout this code does not know: names are _OTHER.
            with handle_internal_errors("wrapping LangGraph's graph runs"):
                wrap_function_wrapper(cls, method, _register_graph_name)
                wrapped.append((cls, method))
        self._wrapped = tuple(wrapped)

    def _uninstrument(self, **kwargs: Any) -> None:
        handler, var = self._handler, self._var
        self._handler = self._var = None
        wrapped, self._wrapped = self._wrapped, ()
        for cls, method in wrapped:
            unwrap_ours(cls, method, _register_graph_name)
        if var is not None:
            _remove_hook(var)
        if handler is not None:
            open_spans = handler.close()
            if open_spans:
                _logger.warning("otel-agentdiag: ended %d LangChain spans still open at uninstrument()", open_spans)

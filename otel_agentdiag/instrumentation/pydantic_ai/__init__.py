"""Pydantic AI (``pydantic-ai-slim``) through its own OpenTelemetry output, given our tracer provider.

Usage::

    from otel_agentdiag.instrumentation.pydantic_ai import PydanticAIInstrumentor

    PydanticAIInstrumentor().instrument()        # or instrument(tracer_provider=...)
    result = await agent.run("What's the weather in Paris?")
    PydanticAIInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_pydantic_ai``).

``instrument()`` calls ``Agent.instrument_all(InstrumentationSettings(tracer_provider=<ours>,
include_content=False, include_binary_content=False, include_model_request_parameters=False))``: every agent
without an ``instrument=`` setting of its own then emits the framework's GenAI-convention spans
(``invoke_agent {agent}``, ``chat {model}``, ``execute_tool {tool}``) into our pipeline, where the GenAI adapter
maps them (:mod:`otel_agentdiag.pipeline.adapters.genai`; the run's ``gen_ai.aggregated_usage.*`` become its
roll-ups). Content keys the framework still writes (``pydantic_ai.all_messages``, ``gen_ai.input.messages``,
``gen_ai.tool.definitions``, ``logfire.*``) are dropped by the redactor, as every key it does not name.

Pydantic AI has no span for a loop step: :mod:`.patch` adds one ``agent.iteration`` per model request/response
step, through the public ``wrap_node_run`` capability hook of the framework's ``Instrumentation`` capability.
The tool names an agent declares (its function toolsets) and its ``name`` are registered as code at its first
step. ``uninstrument()`` restores the previous ``instrument_all()`` setting (read from the ``Agent`` class: the
framework has no getter) and takes the hook off.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._provider import tracer_for, tracer_provider_in_use
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.pydantic_ai.package import _instruments
from otel_agentdiag.instrumentation.pydantic_ai.patch import Iterations, before_node_wrapper, node_run_wrapper

__all__ = ["PydanticAIInstrumentor"]

_logger = logging.getLogger(__name__)
_UNSET = object()


class PydanticAIInstrumentor(Instrumentor):
    """Traces Pydantic AI agent runs: run → iteration per model step → ``chat`` and ``execute_tool`` spans.

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one).
    """

    _iterations: Iterations | None = None
    _hooks: list[tuple[str, Any, bool]] = []  # noqa: RUF012 - replaced, never mutated
    _previous: Any = _UNSET

    _instruments = _instruments

    def _instrument(self, **kwargs: Any) -> None:
        from pydantic_ai import Agent, InstrumentationSettings
        from pydantic_ai.capabilities import Instrumentation

        provider = kwargs.get("tracer_provider") or tracer_provider_in_use() or trace.get_tracer_provider()
        settings = InstrumentationSettings(
            tracer_provider=provider,
            include_content=False,
            include_binary_content=False,
            include_model_request_parameters=False,
        )
        iterations = Iterations(tracer_for(__name__, provider))
        hooks = {"wrap_node_run": node_run_wrapper(iterations), "before_node_run": before_node_wrapper(iterations)}
        wrapped: list[tuple[str, Any, bool]] = []
        try:
            for name, hook in hooks.items():
                own = name in vars(Instrumentation)
                wrap_function_wrapper(Instrumentation, name, hook)
                wrapped.append((name, hook, own))
        except Exception as exc:  # noqa: BLE001 - an unknown layout leaves runs without iterations, never fails
            _logger.warning("otel-agentdiag: no Pydantic AI iteration spans (%s)", type(exc).__name__)
            _unwrap_hooks(Instrumentation, wrapped)
        else:
            self._iterations, self._hooks = iterations, wrapped
        self._previous = getattr(Agent, "_instrument_default", False)
        Agent.instrument_all(settings)

    def _uninstrument(self, **kwargs: Any) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.capabilities import Instrumentation

        previous, self._previous = self._previous, _UNSET
        Agent.instrument_all(False if previous is _UNSET else previous)
        iterations, self._iterations = self._iterations, None
        if iterations is None:
            return
        hooks, self._hooks = self._hooks, []
        _unwrap_hooks(Instrumentation, hooks)
        open_spans = iterations.close()
        if open_spans:
            _logger.warning("otel-agentdiag: ended %d Pydantic AI iteration spans still open", open_spans)


def _unwrap_hooks(cls: type, hooks: list[tuple[str, Any, bool]]) -> None:
    """Take our wrappers off ``cls``'s hooks (in reverse order); a hook it inherited before is inherited again,
    unless another wrapper now sits on it."""
    for name, hook, own in reversed(hooks):
        unwrapped = unwrap_ours(cls, name, hook)
        current = vars(cls).get(name)
        inherited = next((vars(c)[name] for c in cls.__mro__[1:] if name in vars(c)), None)
        if unwrapped and not own and current is not None and current is inherited:
            delattr(cls, name)

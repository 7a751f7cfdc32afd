"""Google ADK (``google-adk``) through its own OpenTelemetry output, with the loop steps it has no span for.

Usage::

    import otel_agentdiag
    from otel_agentdiag.instrumentation.google_adk import GoogleADKInstrumentor

    otel_agentdiag.configure()                  # sets our provider as the global one (the default)
    GoogleADKInstrumentor().instrument()
    async for event in runner.run_async(user_id=..., session_id=..., new_message=...):
        ...
    GoogleADKInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_google_adk``).

ADK emits GenAI-convention spans of its own (schema v2, its default: ``invoke_workflow {root agent}`` →
``invoke_agent {agent}`` → ``generate_content {model}`` and ``execute_tool {tool}``) through a tracer it takes
from the *global* tracer provider when it is imported; as ADK documents, it is given a provider by making that
provider global, which ``configure()`` does unless ``set_global=False``. The GenAI adapter maps those spans
(:mod:`otel_agentdiag.pipeline.adapters.genai`). ADK's content keys (``gen_ai.tool.definitions``, and the
messages and tool arguments it records when its content capture is on) and its ``gcp.vertex.agent.*`` keys are
dropped by the redactor, as every key it does not name.

``Runner.run_async`` (public) runs with its ``session_id`` as the context's conversation, as
:func:`otel_agentdiag.agent_run` does, so each span is numbered in its session at start (ADK sets
``gen_ai.conversation.id`` only after its spans start, and not on tool spans). ADK has no span for a loop step:
:mod:`.patch` adds one ``agent.iteration`` per step, and registers the agent tree's declared agent and tool names
as code. That step is ADK's ``BaseLlmFlow._run_one_step_async``, not a
public hook (ADK's plugin callbacks run *beside* the model call and the tools, never around both): when a release
no longer has it, runs are traced without iterations and a warning says so.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from opentelemetry import trace
from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._provider import tracer_for, tracer_provider_in_use
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.google_adk.package import _instruments
from otel_agentdiag.instrumentation.google_adk.patch import Steps, run_wrapper, step_wrapper

__all__ = ["GoogleADKInstrumentor"]

_logger = logging.getLogger(__name__)
_FLOW_MODULE = "google.adk.flows.llm_flows.base_llm_flow"
_STEP = "BaseLlmFlow._run_one_step_async"
_RUNNERS_MODULE = "google.adk.runners"
_RUN = "Runner.run_async"


class GoogleADKInstrumentor(Instrumentor):
    """Traces Google ADK agent runs: ADK's own spans, plus one iteration per loop step.

    ``instrument()`` keyword arguments: ``tracer_provider`` for the iteration spans (default: the one
    ``configure()`` built, else the global one). ADK's own spans always go to the global provider: a provider
    that is not the global one gets a warning (its runs would be split across two pipelines).
    """

    _wrapped: Any = None
    """Our step wrapper while it is on (None: off)."""
    _run_wrapped = False

    _instruments = _instruments

    def _instrument(self, **kwargs: Any) -> None:
        # Not installed: an ImportError here, which opentelemetry-instrument skips quietly (it checks no
        # dependency of ours before calling this: the wrappers below would only log a warning).
        importlib.import_module(_RUNNERS_MODULE)
        importlib.import_module(_FLOW_MODULE)
        provider = kwargs.get("tracer_provider") or tracer_provider_in_use() or trace.get_tracer_provider()
        if provider is not trace.get_tracer_provider():
            _logger.warning(
                "otel-agentdiag: Google ADK traces into the global tracer provider only; make this one global "
                "(configure(set_global=True), the default) or its runs lose ADK's own spans"
            )
        try:
            wrap_function_wrapper(_RUNNERS_MODULE, _RUN, run_wrapper)
        except Exception as exc:  # noqa: BLE001 - spans still traced, numbered outside their session
            _logger.warning("otel-agentdiag: Google ADK runs not filed by session at start (%s)", type(exc).__name__)
        else:
            self._run_wrapped = True
        try:
            wrapper = step_wrapper(Steps(tracer_for(__name__, provider)))
            wrap_function_wrapper(_FLOW_MODULE, _STEP, wrapper)
        except Exception as exc:  # noqa: BLE001 - an unknown layout leaves runs without iterations, never fails
            _logger.warning("otel-agentdiag: no Google ADK iteration spans (%s)", type(exc).__name__)
            return
        self._wrapped = wrapper

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._run_wrapped:
            from google.adk.runners import Runner  # type: ignore[import-untyped,import-not-found,unused-ignore]

            unwrap_ours(Runner, "run_async", run_wrapper)
            self._run_wrapped = False
        if self._wrapped is not None:
            from google.adk.flows.llm_flows.base_llm_flow import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
                BaseLlmFlow,
            )

            unwrap_ours(BaseLlmFlow, "_run_one_step_async", self._wrapped)
            self._wrapped = None

"""Auto-instrumentation of AutoGen AgentChat (``autogen-agentchat``, with autogen-core and autogen-ext's OpenAI client).

Usage::

    from otel_agentdiag.instrumentation.autogen_agentchat import AutoGenAgentChatInstrumentor

    AutoGenAgentChatInstrumentor().instrument()        # or instrument(tracer_provider=...)
    result = await agent.run(task="What's the weather in Paris?")
    AutoGenAgentChatInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_autogen_agentchat``).

Every ``AssistantAgent.run`` / ``run_stream`` becomes ``invoke_agent {agent}`` → ``agent.iteration`` per model
call → ``chat {model}`` and the ``execute_tool {tool}`` calls that model call asked for (run in parallel by
AgentChat, each its own span); a team's ``run`` / ``run_stream`` is ``invoke_agent {team}`` with each agent's turn a
run nested in it. :mod:`.patch` holds the mapping; it wraps AgentChat's, autogen-core's and autogen-ext's public
methods (listed in :mod:`.package`). Use it with
:class:`~otel_agentdiag.instrumentation.openai.OpenAIInstrumentor` for HTTP attempts and the API's response
details: the client instrumentation then enriches the ``chat`` span (one span per model call).

**autogen-core's own spans.** autogen-core opens GenAI spans of its own (``create_agent``, ``invoke_agent``,
``execute_tool``) on the *global* tracer provider. When that provider is the one this instrumentor traces into
(``configure(set_global=True)``, or zero-code), they would describe the same steps twice: while instrumented,
autogen-core's span helpers (``autogen_core.trace_*_span``, where AgentChat and autogen-core call them) get a
tracer that starts nothing. Another global provider keeps receiving them.

AgentChat has no conversation id: its runs carry none unless the code opens them inside an
``agentdiag.agent_run(..., conversation_id=...)`` or another instrumentation's session context.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from opentelemetry import trace
from wrapt import wrap_function_wrapper

from otel_agentdiag._internal import content as _content
from otel_agentdiag.instrumentation._instrumentor import Instrumentor
from otel_agentdiag.instrumentation._provider import tracer_for, tracer_provider_in_use
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation.autogen_agentchat.package import _instruments
from otel_agentdiag.instrumentation.autogen_agentchat.patch import (
    AgentChatSteps,
    SilentTracer,
    coroutine_wrapper,
    llm_ends,
    run_ends,
    stream_wrapper,
    tool_ends,
)

__all__ = ["AutoGenAgentChatInstrumentor"]

_logger = logging.getLogger(__name__)

_CORE_SPAN_HELPERS = (
    ("autogen_agentchat.agents._base_chat_agent", "trace_create_agent_span"),
    ("autogen_agentchat.agents._base_chat_agent", "trace_invoke_agent_span"),
    ("autogen_agentchat.teams._group_chat._chat_agent_container", "trace_invoke_agent_span"),
    ("autogen_core.tools._base", "trace_tool_span"),
)
"""Where AgentChat and autogen-core look up autogen-core's public span helpers (imported by name there)."""

_SILENT = SilentTracer()


class AutoGenAgentChatInstrumentor(Instrumentor):
    """Traces AutoGen AgentChat runs: run → iteration per model call → ``chat`` and ``execute_tool`` spans.

    ``instrument()`` keyword arguments: ``tracer_provider`` (default: the one ``configure()`` built, else the
    global one).
    """

    _steps: AgentChatSteps | None = None
    _wrapped: tuple[tuple[Any, str, Any], ...] = ()

    _instruments = _instruments

    def _instrument(self, **kwargs: Any) -> None:
        from autogen_agentchat.agents import AssistantAgent, BaseChatAgent  # type: ignore[import-not-found,unused-ignore]
        from autogen_agentchat.base import Response, TaskResult  # type: ignore[import-not-found,unused-ignore]
        from autogen_agentchat.teams import BaseGroupChat  # type: ignore[import-not-found,unused-ignore]
        from autogen_core.models import CreateResult  # type: ignore[import-not-found,unused-ignore]
        from autogen_core.tools import BaseStreamTool, BaseTool  # type: ignore[import-not-found,unused-ignore]

        given = kwargs.get("tracer_provider")
        provider = given or tracer_provider_in_use() or trace.get_tracer_provider()
        steps = AgentChatSteps(tracer_for(__name__, given))

        def start_run(instance: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
            return steps.start_run(instance)

        def start_llm(instance: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
            node = steps.start_llm(instance, kw)
            if node is not None and _content.enabled():
                steps.capture_llm_input(node, args, kw)
            return node

        def start_tool(instance: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
            return steps.start_tool(instance, args, kw)

        def silence(wrapped: Any, instance: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
            # Only when autogen-core's spans would reach the provider ours go to (see the module doc).
            if kw.get("tracer") is None and steps.enabled and trace.get_tracer_provider() is provider:
                kw = {**kw, "tracer": _SILENT}
            return wrapped(*args, **kw)

        run, ended_run = coroutine_wrapper(start_run, run_ends(steps), steps), run_ends(steps)
        run_stream = stream_wrapper(start_run, ended_run, steps, lambda item: isinstance(item, TaskResult))
        turn_stream = stream_wrapper(start_run, ended_run, steps, lambda item: isinstance(item, Response))
        targets: list[tuple[Any, str, Any]] = [
            (BaseChatAgent, "run", run),
            (BaseChatAgent, "run_stream", run_stream),
            (AssistantAgent, "on_messages", run),
            (AssistantAgent, "on_messages_stream", turn_stream),
            (BaseGroupChat, "run", run),
            (BaseGroupChat, "run_stream", run_stream),
            (BaseTool, "run_json", coroutine_wrapper(start_tool, tool_ends(steps), steps)),
            (BaseStreamTool, "run_json_stream", stream_wrapper(start_tool, tool_ends(steps), steps, lambda _: False)),
        ]
        try:
            from autogen_ext.models.openai import BaseOpenAIChatCompletionClient  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # autogen-ext's OpenAI client not installed: no model calls of its to trace
            _logger.debug("otel-agentdiag: autogen-ext's OpenAI client not installed; its model calls untraced")
        else:
            last = lambda item: isinstance(item, CreateResult)  # noqa: E731
            targets += [
                (
                    BaseOpenAIChatCompletionClient,
                    "create",
                    coroutine_wrapper(start_llm, llm_ends(steps), steps, llm=True),
                ),
                (
                    BaseOpenAIChatCompletionClient,
                    "create_stream",
                    stream_wrapper(start_llm, llm_ends(steps), steps, last, llm=True),
                ),
            ]
        wrapped: list[tuple[Any, str, Any]] = []
        try:
            for target, method, wrapper in targets:
                wrap_function_wrapper(target, method, wrapper)
                wrapped.append((target, method, wrapper))
        except Exception as exc:  # noqa: BLE001 - an unknown layout: untraced, never a failure of the app
            _logger.warning(
                "otel-agentdiag: cannot instrument AutoGen AgentChat (%s); it stays untraced", type(exc).__name__
            )
            self._unwrap(wrapped)
            return
        for module_name, helper in _CORE_SPAN_HELPERS:
            try:
                module = importlib.import_module(module_name)
                wrap_function_wrapper(module, helper, silence)
                wrapped.append((module, helper, silence))
            except Exception as exc:  # noqa: BLE001 - another layout: autogen-core's spans stay (the pipeline folds them)
                _logger.debug("otel-agentdiag: autogen-core's %s left as is (%s)", helper, type(exc).__name__)
        self._steps, self._wrapped = steps, tuple(wrapped)

    def _uninstrument(self, **kwargs: Any) -> None:
        wrapped, self._wrapped = self._wrapped, ()
        self._unwrap(list(wrapped))
        steps, self._steps = self._steps, None
        if steps is not None:
            open_spans = steps.close()
            if open_spans:
                _logger.warning("otel-agentdiag: ended %d AutoGen spans still open at uninstrument()", open_spans)

    @staticmethod
    def _unwrap(wrapped: list[tuple[Any, str, Any]]) -> None:
        for target, method, wrapper in reversed(wrapped):
            unwrap_ours(target, method, wrapper)

"""Maps LangChain / LangGraph callbacks to OpenTelemetry GenAI spans.

LangChain reports every step of a run to its callback handlers: ``on_chain_start``/``on_chain_end``,
``on_chat_model_start``/``on_llm_end``, ``on_tool_start``/``on_tool_end`` (and ``*_error``), each with the step's
``run_id`` and its parent's ``parent_run_id``. :class:`AgentDiagCallbackHandler` builds the OpenTelemetry tree from
those ids (never from the ambient context):

=====================================  ================================  =============================================
LangChain run                          OpenTelemetry span                notes
=====================================  ================================  =============================================
outermost chain / graph (no parent,    ``invoke_agent {name}`` (run)     the run's ``name`` (``create_agent(name=...)``,
or a parent not traced here; or a                                        ``create_react_agent(name=...)``, a
chain run by a tool: a nested agent)                                     ``run_name``, ``LangGraph``); stop reason
LangGraph node (``langgraph_step``)    ``agent.iteration`` (iteration)   one per model call: a step of the node that
                                                                         calls the model opens one (shared by the
                                                                         step's nodes), the steps of other nodes (the
                                                                         tool node) join it; ``agentdiag.iteration
                                                                         .index`` = the opening step
any other chain, retriever             no span                           its children hang under its parent's span
chat model / LLM                       ``chat {model}`` (llm, CLIENT)    ``text_completion {model}`` for a plain LLM;
                                                                         usage, response model, finish reasons
tool                                   ``execute_tool {tool}`` (tool)    ``gen_ai.tool.call.id`` = ``tool_call_id``
a tool call answered without a tool    ``execute_tool {tool}`` (tool)    an unknown tool name (LangGraph's ToolNode
run (error ``ToolMessage`` only)                                         answers it without running anything)
=====================================  ================================  =============================================

**Iterations.** A step's iteration span starts with its first node run and ends at the time its last node run
ends; it is handed to the exporter when the next step starts (or the run ends), so a node of the same step that
starts late (parallel tasks on a thread pool) still finds it open and no step gets two spans.

**Outcomes.** A run that ends normally stops ``completed``; one whose chain fails stops ``error`` (status ERROR,
``error.type`` = the exception class), ``recursion_limit`` for LangGraph's ``GraphRecursionError`` and
``cancelled`` for a cancellation. A tool that fails has status ERROR and ``error.type`` whether the error kills the
run or is fed back to the model (``ToolNode(handle_tool_errors=True)``, ``handle_tool_error=True``: a
``ToolMessage`` with ``status="error"``); the run's own outcome says which it was.

**Correlation.** ``config["configurable"]["thread_id"]`` (LangGraph's conversation key, which LangChain copies into
the run's metadata), else ``metadata["conversation_id"]``, else ``metadata["session_id"]``, becomes
``gen_ai.conversation.id`` on every span of the run (hashed by the redacting processor).

**Names.** Only names from the user's definitions are registered (the redactor exports any other name as
``_OTHER``), and only if they pass the public-safety check. The tools bound to each chat model call
(``invocation_params["tools"]``, the agent's tool definitions) are registered as tool names; a tool span is named
by its tool's definition (``serialized["name"]``), never by a per-call ``run_name``. A run's name is what LangChain
reports: a per-call ``run_name`` (``config={"run_name": ...}``: data) or the runnable's own name, which the
callback cannot tell apart, so it registers neither: a LangGraph graph's own name (``compile(name=...)``,
``create_agent(name=...)``, ``create_react_agent(name=...)``) is registered by
:class:`~otel_agentdiag.instrumentation.langchain.LangChainInstrumentor`, which reads it from the graph object when
the graph runs. A per-call ``run_name``, a plain chain's name, and every run name under a handler passed by hand
without the instrumentor leave as ``_OTHER`` unless declared with ``register_names()``. A tool name seen only when
a tool runs, or only in a model's answer, is never registered.

**Content.** Nothing LangChain passes as content (messages, prompts, tool inputs and outputs, exception messages)
is put on a span; from a step's output only the error ``ToolMessage``\\ s' tool names and call ids are read.
With content capture on (``configure(capture_content=True)``) it is captured beside the spans, as LangChain
passes it: a run's input messages and output messages are the graph's ``inputs`` and ``outputs``; a chat span's
input messages are the messages sent (one prompt's list, else the list of lists; a system prompt is among them)
and its tool definitions the bound ``tools``; a ``text_completion`` span's input messages are the prompts; output
messages are the answers' messages (chat) or texts (completion), one prompt's answers as a flat list; a tool
span's arguments are the tool's ``inputs`` (else its input string) and its result what the tool returned, or
the exception it raised (a tool call answered without a tool run: the error ``ToolMessage``). Iterations carry
none.

The chat model and tool steps are made *active* while they run (the callbacks run inline, in the step's own
context): our OpenAI and Anthropic client instrumentations called by the model enrich its ``chat`` span instead of
starting a second one, and manual wrappers used inside a tool become children of its span.

The module holds the handler's hooks: each reads what LangChain passes and records it in the run table it
inherits (:mod:`._runs`); span names, attributes, usage and outcomes are read by :mod:`._mapping`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from opentelemetry import trace

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag.instrumentation._base import error_type_of
from otel_agentdiag.instrumentation._framework import tool_span
from otel_agentdiag.instrumentation._provider import tracer_for
from otel_agentdiag.instrumentation.langchain._mapping import (
    ERROR_TYPE_TOOL_ERROR,
    answers_of,
    llm_end_attributes,
    nonempty_str,
    one_prompt,
)
from otel_agentdiag.instrumentation.langchain._runs import FOLD, TOOL, Run, RunTable

try:  # langchain-core is an optional dependency: the module must import without it (for documentation tools)
    from langchain_core.callbacks import BaseCallbackHandler
except ImportError:  # pragma: no cover - exercised only without langchain-core
    BaseCallbackHandler = object  # type: ignore[assignment,misc]

__all__ = [
    "ERROR_TYPE_TOOL_ERROR",
    "SCOPE",
    "AgentDiagCallbackHandler",
]

SCOPE = "otel_agentdiag.instrumentation.langchain"
"""Instrumentation scope of the spans (the same for the instrumentor and a handler made by hand)."""


class AgentDiagCallbackHandler(RunTable, BaseCallbackHandler):  # type: ignore[misc]
    """A LangChain callback handler that turns runs into OpenTelemetry GenAI spans (see the module docstring).

    Attached to every run by :class:`~otel_agentdiag.instrumentation.langchain.LangChainInstrumentor`, or passed by
    hand: ``agent.invoke(inputs, config={"callbacks": [AgentDiagCallbackHandler()]})`` (not both: two handlers make
    two spans per step). Never raises into LangChain: a failure is logged by type and the step stays untraced.
    """

    run_inline = True
    """Called in the run's own context, also under ``ainvoke`` (not in an executor thread): the model and tool
    steps are made active where their code runs."""
    raise_error = False

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        super().__init__(tracer_for(SCOPE, tracer_provider))

    # LangChain skips the hooks of the kinds a handler ignores: these carry nothing the spans need. (Not
    # ignore_agent: it also switches off the tool hooks.)
    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    # Each hook names only the arguments it reads; LangChain's others (tags, ...) arrive in ``kwargs``.
    # -- chains -----------------------------------------------------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain run"):
            self._chain_start(serialized, inputs, run_id, parent_run_id, metadata, kwargs.get("name"))

    def on_chain_end(self, outputs: dict[str, Any], *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain run"):
            self._chain_end(run_id, outputs, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain run"):
            self._chain_end(run_id, None, error)

    # -- retrievers: no span, their children hang under their parent -----------------------------------
    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("following a LangChain retriever run"):
            parent = self._tree.get(parent_run_id) if parent_run_id is not None else None
            if parent is not None:
                self._tree.alias(run_id, parent)
                with self._lock:
                    self._runs[run_id] = Run(parent, FOLD)

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("following a LangChain retriever run"):
            self._chain_end(run_id, None, None)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.on_retriever_end(None, run_id=run_id)

    # -- model calls ------------------------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain model call"):
            params = kwargs.get("invocation_params")
            node = self._llm_start(sc.OP_CHAT, run_id, parent_run_id, metadata, params)
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_INPUT_MESSAGES, one_prompt(messages))
                tools = params.get("tools") if isinstance(params, Mapping) else None
                if tools:
                    node.capture(sc.CONTENT_TOOL_DEFINITIONS, tools)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain model call"):
            params = kwargs.get("invocation_params")
            node = self._llm_start(sc.OP_TEXT_COMPLETION, run_id, parent_run_id, metadata, params)
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_INPUT_MESSAGES, prompts)

    def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("recording a LangChain stream chunk"):
            # Only the time to the first chunk: the usage the last chunk carries is counted once, at on_llm_end.
            node = self._tree.get(run_id)
            if node is not None and node.llm is not None:
                node.llm.first_chunk()

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain model call"):
            record = self._take(run_id)
            if record is None:
                return
            attributes: dict[str, Any] = {}
            with handle_internal_errors("reading a LangChain model answer"):
                attributes = llm_end_attributes(response)
            if _content.enabled():
                with handle_internal_errors("reading a LangChain model answer"):
                    answers = answers_of(response)
                    if answers is not None:
                        record.node.capture(sc.CONTENT_OUTPUT_MESSAGES, answers)
            self._tree.end(run_id, attributes=attributes)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain model call"):
            record = self._take(run_id)
            if record is not None:
                self._tree.end(run_id, error_type=error_type_of(error))

    # -- tools ------------------------------------------------------------------------------------------
    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain tool"):
            tool = nonempty_str(serialized.get("name") if isinstance(serialized, Mapping) else None) or nonempty_str(
                kwargs.get("name")
            )
            call_id = nonempty_str(kwargs.get("tool_call_id"))
            name, attributes = tool_span(tool, call_id)
            node = self._tree.start(run_id, parent_run_id, kind=sc.KIND_TOOL, name=name, attributes=attributes)
            if node is None:
                return
            if _content.enabled():
                node.capture(sc.CONTENT_TOOL_ARGUMENTS, inputs if inputs is not None else input_str)
            run = node.nearest(sc.KIND_RUN)
            with self._lock:
                self._runs[run_id] = Run(node, TOOL)
                if call_id is not None and run is not None:
                    run.extra.setdefault("calls", set()).add(call_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain tool"):
            record = self._take(run_id)
            if record is None:
                return
            if _content.enabled():
                record.node.capture(sc.CONTENT_TOOL_RESULT, output)
            # A ToolMessage with status "error": the tool's error went back to the model as its answer.
            failed = getattr(output, "type", None) == "tool" and getattr(output, "status", None) == "error"
            self._tree.end(run_id, error_type=ERROR_TYPE_TOOL_ERROR if failed else None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain tool"):
            record = self._take(run_id)
            if record is not None:
                if _content.enabled():
                    record.node.capture(sc.CONTENT_TOOL_RESULT, error)
                # Fatal or fed back to the model: the tool failed either way; the run's outcome tells which.
                self._tree.end(run_id, error_type=error_type_of(error))

"""Maps the OpenAI Agents SDK's trace spans to OpenTelemetry GenAI spans.

The SDK reports each step of a run to its trace processors: ``on_span_start``/``on_span_end`` with the step's
``span_id``, its ``parent_id`` and typed ``span_data``. :class:`AgentDiagTracingProcessor` builds the
OpenTelemetry tree from those ids (never from the ambient context):

===================  ============================================  ==========================================
SDK span (``type``)  OpenTelemetry span                            notes
===================  ============================================  ==========================================
task + first agent   ``invoke_agent {agent}`` (run)                one span from task start to task end
agent (later ones)   ``invoke_agent {agent}`` (run)                the target of a handoff, inside the run
turn                 ``agent.iteration`` (iteration)               ``agentdiag.iteration.index`` = the turn
generation/response  ``chat {model}`` (llm, CLIENT)                usage, response model and id; owns the call
function             ``execute_tool {tool}`` (tool)                ``gen_ai.tool.call.id`` from the answer
handoff              ``execute_tool transfer_to_{agent}`` (tool)   source and target agent names
guardrail            ``agentdiag.guardrail`` (other)               name, whether its tripwire triggered
anything else        ``agentdiag.framework_step`` (other)          ``agentdiag.framework.span_type``
===================  ============================================  ==========================================

The run's ``RunConfig.group_id`` (the trace's ``group_id``) becomes ``gen_ai.conversation.id`` on every span,
including the LLM span a client instrumentation enriches. Nothing the SDK records as content (inputs, outputs,
instructions, error details) is put on a span; from a model's answer only the tool call ids and tool names are
read, to give each ``execute_tool`` span its call id. When the run has ``trace_include_sensitive_data=False``
the SDK does not record the answer, and the tool spans carry no call id.

**Content capture** (``configure(capture_content=True)``) reads only what the SDK records in its span data, as
each step ends; the SDK records it only when the run traces sensitive data, so
``RunConfig(trace_include_sensitive_data=False)`` (or ``OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false``)
captures nothing for the run, and a client instrumentation inside a model step captures nothing either:

==========  =====================================================================================================
step        content
==========  =====================================================================================================
generation  input messages = ``input`` (chat-completions messages, the system instructions first); output
            messages = ``output`` (the answer's messages; for a streamed call, the output items of the
            Responses-shaped answer the SDK records). The SDK records no tool definitions here.
response    input messages = ``input`` (the Responses input items); output messages, system instructions and
            tool definitions = the ``Response``'s ``output``, ``instructions`` and ``tools`` (when not empty)
function    tool arguments = ``input`` (the arguments JSON string as the model sent it); tool result =
            ``output``: what the tool returned, or the message the SDK fed back to the model for a failed
            tool; for a failure that ended the run, the SDK's error record (``{"message", "data"}``)
==========  =====================================================================================================

Agent, task, turn, handoff, guardrail and custom steps carry no content (custom spans' ``data`` is the
application's, not the model's).

This module keeps the span table (SDK span id -> node, the run a step belongs to, the tool call ids a model
answered with, the conversation of each trace); what each step's span is called and carries is read by
:mod:`._mapping`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag.instrumentation._framework import Node, SpanTree
from otel_agentdiag.instrumentation.openai_agents._mapping import (
    capture_model_call,
    capture_tool_call,
    guardrail_end_attributes,
    guardrail_span,
    handoff_end_attributes,
    handoff_span,
    iteration_span,
    llm_end_attributes,
    model_span,
    other_span,
    run_attributes,
    sdk_error_type,
    stop_reason,
    tool_calls,
    tool_span,
)

try:  # the SDK is an optional dependency: the module must import without it (for documentation tools)
    from agents.tracing import TracingProcessor
except ImportError:  # pragma: no cover - exercised only without openai-agents
    TracingProcessor = object  # type: ignore[assignment,misc]

__all__ = ["AgentDiagTracingProcessor"]


class AgentDiagTracingProcessor(TracingProcessor):  # type: ignore[misc]
    """An Agents SDK ``TracingProcessor`` that turns the SDK's spans into OpenTelemetry spans on ``tracer``.

    Register it with ``agents.add_trace_processor()`` (or let :class:`OpenAIAgentsInstrumentor` do it). Never
    raises into the SDK: a failure is logged by type and the step stays untraced.
    """

    def __init__(self, tracer: trace.Tracer, names: NameRegistry | None = None) -> None:
        self._tree = SpanTree(tracer)
        self._names = names or default_registry
        self._conversations: dict[str, str] = {}
        self._lock = threading.Lock()
        self._enabled = True

    @property
    def open_spans(self) -> int:
        """How many SDK steps are in progress (their spans not yet ended)."""
        return len(self._tree)

    # -- traces -----------------------------------------------------------------------------------------
    def on_trace_start(self, trace: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("reading an Agents SDK trace"):
            group_id = getattr(trace, "group_id", None)
            if group_id is not None:
                with self._lock:
                    self._conversations[trace.trace_id] = str(group_id)

    def on_trace_end(self, trace: Any) -> None:
        with handle_internal_errors("reading an Agents SDK trace"), self._lock:
            self._conversations.pop(trace.trace_id, None)

    # -- spans ------------------------------------------------------------------------------------------
    # Inline try/except rather than handle_internal_errors(): these run twice for every step of every run.
    def on_span_start(self, span: Any) -> None:
        if not self._enabled:
            return
        try:
            self._start(span)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("starting a span for an Agents SDK step", exc)

    def on_span_end(self, span: Any) -> None:
        if not self._enabled:
            return
        try:
            self._end(span)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending a span for an Agents SDK step", exc)

    def _start(self, span: Any) -> None:
        data = span.span_data
        kind = data.type
        key, parent_key = span.span_id, span.parent_id
        tree = self._tree
        conversation = None
        if parent_key is None or tree.get(parent_key) is None:
            with self._lock:
                conversation = self._conversations.get(span.trace_id)
        if kind == "task":
            node = tree.new_node(key, parent_key, kind=sc.KIND_RUN, conversation_id=conversation)
            node.extra["task"] = True
            node.extra["start_ns"] = time.time_ns()
            return
        if kind == "agent":
            self._start_agent(span, data, conversation)
            return
        parent = tree.get(parent_key) if parent_key is not None else None
        if parent is not None and not parent.span.get_span_context().is_valid and parent.extra.get("task"):
            self._open_run(parent, None)  # a step directly under a task that has no agent yet
        our_kind, span_kind = sc.KIND_OTHER, SpanKind.INTERNAL
        if kind == "turn":
            agent = parent.nearest(sc.KIND_RUN) if parent is not None else None
            if agent is not None:
                self._register_agent_names(agent)
            our_kind, (name, attributes) = sc.KIND_ITERATION, iteration_span(data)
        elif kind in ("generation", "response"):
            our_kind, span_kind, (name, attributes) = sc.KIND_LLM, SpanKind.CLIENT, model_span(data)
        elif kind == "function":
            tool = str(data.name)
            if parent is not None:
                agent = parent.nearest(sc.KIND_RUN)
                if agent is not None:
                    self._register_agent_names(agent)
            our_kind, (name, attributes) = sc.KIND_TOOL, tool_span(data, tool, self._take_call_id(parent, tool))
        elif kind == "handoff":
            our_kind, (name, attributes) = sc.KIND_TOOL, handoff_span(data)
        elif kind == "guardrail":
            self._names.register_valid("guardrail", (data.name,))
            name, attributes = guardrail_span(data)
        else:
            name, attributes = other_span(kind)
        tree.start(
            key,
            parent_key,
            kind=our_kind,
            name=name,
            attributes=attributes,
            span_kind=span_kind,
            conversation_id=conversation,
        )

    def _start_agent(self, span: Any, data: Any, conversation: str | None) -> None:
        tree = self._tree
        parent = tree.get(span.parent_id) if span.parent_id is not None else None
        self._names.register_valid("agent", (data.name,))
        if parent is not None and parent.extra.get("task") and not parent.span.get_span_context().is_valid:
            # The task and its first agent are one run span, from the task's start to its end.
            tree.alias(span.span_id, parent)
            parent.extra["agent_data"] = data
            self._open_run(parent, data.name)
            return
        node = tree.new_node(span.span_id, span.parent_id, kind=sc.KIND_RUN, conversation_id=conversation)
        node.extra["agent_data"] = data
        tree.open(node, f"{sc.OP_INVOKE_AGENT} {data.name}", run_attributes(data.name))

    def _open_run(self, node: Node, agent: str | None) -> None:
        name = sc.OP_INVOKE_AGENT if agent is None else f"{sc.OP_INVOKE_AGENT} {agent}"
        self._tree.open(node, name, run_attributes(agent), start_time=node.extra.get("start_ns"))

    def _register_agent_names(self, run: Node) -> None:
        """The agent's declared tools and handoff targets are code: allow their names."""
        data = run.extra.get("agent_data")
        if data is None:
            return
        tools, handoffs = data.tools or (), data.handoffs or ()
        seen = run.extra.get("registered")
        if seen == (len(tools), len(handoffs)):
            return
        run.extra["registered"] = (len(tools), len(handoffs))
        names = self._names
        names.register_valid("tool", tools)
        names.register_valid("agent", handoffs)
        # A transfer tool's name holds its target's, where the check may not see it ("transfer_to_Bearer ..."
        # has no word boundary before "Bearer"): it is declared only for a target that passed the check itself.
        names.register_valid("tool", (f"transfer_to_{target}" for target in handoffs if names.is_agent(target)))

    @staticmethod
    def _take_call_id(parent: Node | None, tool: str) -> str | None:
        iteration = parent.nearest(sc.KIND_ITERATION) if parent is not None else None
        if iteration is None:
            return None
        pending: list[tuple[str, str]] = iteration.extra.get("calls", [])
        for index, (name, call_id) in enumerate(pending):
            if name == tool:
                del pending[index]
                return call_id
        return None

    def _end(self, span: Any) -> None:
        data = span.span_data
        kind = data.type
        key = span.span_id
        tree = self._tree
        node = tree.get(key)
        if node is None:
            return
        error_type = sdk_error_type(span.error)
        if kind == "agent" and node.extra.get("task") and node.key != key:
            # The first agent of a task: its span is the task's, which ends with the task.
            tree.forget(key)
            self._register_agent_names(node)
            if error_type is not None:
                self._fail_run(node, error_type)
            return
        attributes: dict[str, Any] = {}
        if kind in ("generation", "response"):
            attributes = self._llm_end(node, data)
            if _content.enabled():
                capture_model_call(node, data)
        elif kind == "function":
            if _content.enabled():
                capture_tool_call(node, data, span.error)
        elif kind == "agent":
            self._register_agent_names(node)
            if error_type is not None:
                self._fail_run(node, error_type)
                error_type = None  # _fail_run set it on the node
            elif node.parent is None and not node.extra.get("handed_off"):
                node.stop_reason = sc.STOP_COMPLETED
        elif kind == "task":
            if not node.span.get_span_context().is_valid:
                self._open_run(node, None)
            if error_type is not None:
                self._fail_run(node, error_type)
                error_type = None
            elif node.error_type is None:
                node.stop_reason = node.stop_reason or sc.STOP_COMPLETED
        elif kind == "turn":
            if error_type is not None:
                run = node.parent.nearest(sc.KIND_RUN) if node.parent is not None else None
                if run is not None:
                    self._fail_run(run, error_type)
        elif kind == "handoff":
            attributes = self._handoff_end(node, data)
        elif kind == "guardrail":
            attributes = guardrail_end_attributes(data)
        tree.end(key, attributes=attributes, error_type=error_type)

    def _fail_run(self, run: Node, error_type: str) -> None:
        """A run-fatal error: the run, and every run enclosing it, failed with ``error_type``."""
        reason = stop_reason(error_type)
        node: Node | None = run
        while node is not None:
            if node.kind == sc.KIND_RUN and node.error_type is None:
                node.error_type = error_type
                node.stop_reason = reason
            node = node.parent

    def _llm_end(self, node: Node, data: Any) -> dict[str, Any]:
        attributes = llm_end_attributes(data)
        model = attributes.get(sc.GEN_AI_REQUEST_MODEL)
        if model is None:  # a Responses span names no model: the client instrumentation may have recorded it
            model = (getattr(node.span, "attributes", None) or {}).get(sc.GEN_AI_REQUEST_MODEL)
        if isinstance(model, str) and model:
            node.span.update_name(f"{sc.OP_CHAT} {model}")
        calls = tool_calls(data)
        if calls:
            iteration = node.nearest(sc.KIND_ITERATION)
            if iteration is not None:
                iteration.extra.setdefault("calls", []).extend(calls)
        return attributes

    def _handoff_end(self, node: Node, data: Any) -> dict[str, Any]:
        attributes = handoff_end_attributes(data)
        tool = attributes.get(sc.GEN_AI_TOOL_NAME)
        if tool is not None:
            node.span.update_name(f"{sc.OP_EXECUTE_TOOL} {tool}")
        run = node.nearest(sc.KIND_RUN)
        if run is not None:
            run.extra["handed_off"] = True
        return attributes

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> int:
        """Stop mapping and end every span still open with ``error.type = agentdiag.uninstrumented``.
        Returns how many were open."""
        self._enabled = False
        return self._tree.end_all(sc.ERROR_TYPE_UNINSTRUMENTED)

    def shutdown(self) -> None:
        """The SDK is shutting its tracing down (at exit): nothing to flush, the OpenTelemetry pipeline
        exports what ended."""

    def force_flush(self) -> None:
        """Nothing is buffered here; spans are handed to the OpenTelemetry SDK as each step ends."""

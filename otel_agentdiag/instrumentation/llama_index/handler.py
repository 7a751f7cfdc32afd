"""The dispatcher handlers that turn LlamaIndex's step notifications into our run, iteration, LLM and tool spans.

LlamaIndex reports every decorated method call to the span handlers of its root instrumentation dispatcher
(``span_enter`` / ``span_exit`` / ``span_drop``, with the call's id, its parent's id, the instance and the bound
arguments) and its events (a model call's ``LLMChatEndEvent`` with the response) to the event handlers. The
mapping, for the workflow agents (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``, ``AgentWorkflow``):

- a workflow agent's ``run`` → ``invoke_agent {agent}`` (kind ``run``); its span ends when the run's handler
  (a future) completes. Its agent and tool names come from the agent's definitions (``name``, ``tools``) and are
  registered then: they are code;
- each ``run_agent_step`` of the run → ``agent.iteration`` (index 0, 1, ...): the model turn and the tool calls
  that follow it (LlamaIndex runs each tool in a ``call_tool`` step beside, not inside, ``run_agent_step``: the
  iteration stays open until the next ``run_agent_step`` starts or the run ends, and ``call_tool`` steps hang
  under it);
- the outermost model call of an LLM (``chat``, ``achat``, ``stream_chat``, ``complete``, ...) → ``chat {model}``
  (or ``text_completion``), with the usage of the response (the leaf; the run and iteration carry roll-ups). A
  streaming call's span ends at its stream's end event (LlamaIndex's ``LLMChatEndEvent``, which carries the final
  response and the call's span id), not when the stream is returned; a stream never consumed ends with its run;
- the outermost ``call`` / ``acall`` of a tool → ``execute_tool {tool}``, with the call id of its ``ToolCall``
  event (a correlation id: hashed, never raw); a tool that raises, or returns a ``ToolOutput`` with
  ``is_error``, is a failed span with ``error.type`` only;
- every other step (``init_run``, ``setup_agent``, ``parse_agent_output``, ``aggregate_tool_results``, prompt
  formatting, ``_prepare_chat_with_tools``, memory) gets no span: its children hang under its nearest traced
  ancestor. A step outside any agent run is not traced, except a model or tool call (a root span of its own).

Parents come from the dispatcher's ids (:class:`~otel_agentdiag.instrumentation._framework.SpanTree`), never
from the ambient context, so ``asyncio.gather`` of runs cannot misparent a span. Every hook swallows its own
failures: the dispatcher's caller never sees one. Content (messages, tool arguments, results) is read only with
content capture on (``configure(capture_content=True)``), and handed to the local store's content recorder.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Hashable
from typing import Any

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.tools.types import AsyncBaseTool, BaseTool
from opentelemetry import trace
from pydantic import PrivateAttr
from workflows import Workflow

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.context import ACTIVE_FRAMEWORK_STEP, STREAMING_IN_USE, STREAMING_STEP
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._base import error_type_of
from otel_agentdiag.instrumentation._framework import Node, SpanTree, run_span, tool_span
from otel_agentdiag.instrumentation._provider import tracer_for
from otel_agentdiag.instrumentation.llama_index._mapping import (
    ERROR_TYPE_TOOL_ERROR,
    MODEL_METHODS,
    TOOL_METHODS,
    agent_name,
    declared_names,
    llm_span,
    messages_content,
    method_of,
    response_attributes,
    tool_arguments,
    tool_name,
)

__all__ = ["SCOPE", "AgentDiagEventHandler", "AgentDiagSpanHandler", "StepTable"]

SCOPE = "otel_agentdiag.instrumentation.llama_index"

_RUN, _STEP, _FOLD, _LLM, _TOOL = "run", "step", "fold", "llm", "tool"
_TOOL_TYPES = (BaseTool, AsyncBaseTool)


class StepTable:
    """The spans of the LlamaIndex steps in progress, keyed by the dispatcher's span ids. Thread-safe."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tree = SpanTree(tracer)
        self._roles: dict[str, str] = {}
        self._call_ids: dict[str, str] = {}  # a call_tool step's id -> its ToolCall's tool_id
        self._streams: dict[str, Node] = {}  # streaming model calls returned, not yet consumed to their end
        self._lock = threading.Lock()

    @property
    def open_spans(self) -> int:
        """How many traced steps are in progress."""
        with self._lock:
            return sum(1 for role in self._roles.values() if role in (_RUN, _LLM, _TOOL))

    # -- entering ----------------------------------------------------------------------------------------
    def enter(self, id_: str, bound_args: inspect.BoundArguments, instance: Any, parent_id: str | None) -> None:
        tree = self._tree
        parent = tree.get(parent_id) if parent_id is not None else None
        method = method_of(id_)
        if isinstance(instance, Workflow) and method == "run" and _is_agent(instance):
            self._start_run(id_, instance, parent_id if parent is not None else None)
        elif parent is not None and method == "run_agent_step":  # a step function: reported without its instance
            self._start_iteration(id_, parent)
        elif (
            isinstance(instance, BaseLLM) and method in MODEL_METHODS and (parent is None or parent.kind != sc.KIND_LLM)
        ):
            name, attributes = llm_span(instance, method)
            node = self._start(id_, parent_id if parent is not None else None, sc.KIND_LLM, name, attributes, _LLM)
            if node is not None and _content.enabled():
                arguments = bound_args.arguments
                prompt = arguments.get("messages", arguments.get("prompt"))
                node.capture(sc.CONTENT_INPUT_MESSAGES, messages_content(prompt))
        elif (
            isinstance(instance, _TOOL_TYPES)
            and method in TOOL_METHODS
            and (parent is None or parent.kind != sc.KIND_TOOL)
        ):
            with self._lock:
                call_id = self._call_ids.get(parent_id) if parent_id is not None else None
            name, attributes = tool_span(tool_name(instance), call_id)
            node = self._start(id_, parent_id if parent is not None else None, sc.KIND_TOOL, name, attributes, _TOOL)
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_TOOL_ARGUMENTS, tool_arguments(bound_args.arguments))
        elif parent is not None:
            if method == "call_tool":  # the ToolCall event names the call
                call_id = getattr(bound_args.arguments.get("ev"), "tool_id", None)
                if type(call_id) is str and call_id:
                    with self._lock:
                        self._call_ids[id_] = call_id
            if parent.kind == sc.KIND_RUN and parent.extra.get("iteration") is not None:
                parent = parent.extra["iteration"]  # call_tool steps are the run's children: they go under its turn
            tree.alias(id_, parent)  # no span of its own: its children hang under the nearest traced step
            with self._lock:
                self._roles[id_] = _FOLD

    def _start(
        self, id_: str, parent_key: str | None, kind: str, name: str, attributes: dict[str, Any], role: str
    ) -> Node | None:
        node = self._tree.start(id_, parent_key, kind=kind, name=name, attributes=attributes, activate=True)
        if node is not None:
            with self._lock:
                self._roles[id_] = role
        return node

    def _start_run(self, id_: str, workflow: Any, parent_key: str | None) -> None:
        agents, tools = declared_names(workflow)
        default_registry.register_valid("agent", agents)
        default_registry.register_valid("tool", tools)
        name, attributes = run_span(agent_name(workflow))
        # Not activated: the span ends in the run handler's done callback, in another context.
        node = self._tree.start(id_, parent_key, kind=sc.KIND_RUN, name=name, attributes=attributes, activate=False)
        if node is None:
            return
        node.extra["iteration"] = None
        node.extra["iterations"] = 0
        with self._lock:
            self._roles[id_] = _RUN

    def _start_iteration(self, id_: str, parent: Node) -> None:
        """A ``run_agent_step``: the previous iteration of its run ends, the next one starts."""
        run = parent.nearest(sc.KIND_RUN)
        if run is None:
            self._tree.alias(id_, parent)
            with self._lock:
                self._roles[id_] = _FOLD
            return
        with self._lock:
            previous: Node | None = run.extra.get("iteration")
            index: int = run.extra.get("iterations", 0)
            run.extra["iterations"] = index + 1
        if previous is not None:
            self._tree.end(previous.key)
        key: Hashable = ("agentdiag.iteration", run.key, index)
        iteration = self._tree.start_iteration(key, run.key, index)
        with self._lock:
            run.extra["iteration"] = iteration
        if iteration is not None:
            self._tree.alias(id_, iteration)
            with self._lock:
                self._roles[id_] = _STEP

    # -- exiting -----------------------------------------------------------------------------------------
    def exit(self, id_: str, result: Any = None, err: BaseException | None = None) -> None:
        with self._lock:
            role = self._roles.pop(id_, None)
            self._call_ids.pop(id_, None)
        if role is None:
            return
        tree = self._tree
        if role in (_FOLD, _STEP):
            tree.forget(id_)
            return
        if role == _LLM and err is None and (inspect.isgenerator(result) or inspect.isasyncgen(result)):
            self._keep_streaming(id_)
            return
        error_type = error_type_of(err) if err is not None else None
        if role == _TOOL and error_type is None and getattr(result, "is_error", False) is True:
            error_type = ERROR_TYPE_TOOL_ERROR
        if role == _TOOL and err is None and _content.enabled():
            node = tree.get(id_)
            if node is not None:
                node.capture(sc.CONTENT_TOOL_RESULT, str(getattr(result, "content", result)))
        if role == _RUN:
            node = tree.get(id_)
            iteration = node.extra.get("iteration") if node is not None else None
            for stream in node.extra.get("streams", ()) if node is not None else ():
                with self._lock:
                    self._streams.pop(stream, None)
                tree.end(stream)  # a stream never consumed to its end: ended with its run
            if iteration is not None:
                tree.end(iteration.key)
        tree.end(id_, error_type=error_type)

    def _keep_streaming(self, id_: str) -> None:
        """A streaming model call returned its stream: its span stays open until the stream's end event (which
        carries the usage), or its run's end. It stops being the active step of this context now."""
        node = self._tree.get(id_)
        if node is None:
            return
        with self._lock:
            self._streams[id_] = node
        run = node.nearest(sc.KIND_RUN)
        if run is not None:
            run.extra.setdefault("streams", []).append(id_)
        if ACTIVE_FRAMEWORK_STEP.get() is node:
            ACTIVE_FRAMEWORK_STEP.set(node.prev_active)
        # LlamaIndex's streaming LLMs send their request when the stream is first read: the client call made then
        # in this context is this step's (a client instrumentation enriches it), not a trace of its own.
        STREAMING_STEP.set(node)
        STREAMING_IN_USE[0] = True

    # -- events ------------------------------------------------------------------------------------------
    def model_response(self, span_id: Any, response: Any) -> None:
        """A model call's response: its usage and response model go on the call's span (the leaf)."""
        node = self._tree.get(span_id) if type(span_id) is str else None
        if node is None or node.kind != sc.KIND_LLM or node.ended:
            return
        attributes = response_attributes(response)
        if attributes and node.span.is_recording():
            node.span.set_attributes(attributes)
        if _content.enabled():
            message = getattr(response, "message", None)
            answer = messages_content([message]) if message is not None else getattr(response, "text", None)
            node.capture(sc.CONTENT_OUTPUT_MESSAGES, answer)
        with self._lock:
            streamed = self._streams.pop(span_id, None)
        if streamed is not None:
            self._tree.end(span_id)  # the end event of a stream: the call is over

    def close(self) -> int:
        """End every span still open (the instrumentor is being removed). Returns how many."""
        with self._lock:
            self._roles.clear()
            self._call_ids.clear()
            self._streams.clear()
        return self._tree.end_all("otel_agentdiag.uninstrumented")


def _is_agent(workflow: Any) -> bool:
    """A workflow agent or an AgentWorkflow (by their fields: the classes live in a module whose import is heavy)."""
    return hasattr(workflow, "run_agent_step")


class AgentDiagSpanHandler(BaseSpanHandler[Any]):
    """A LlamaIndex span handler that feeds a :class:`StepTable`. It keeps no spans of LlamaIndex's kind."""

    _table: StepTable | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "AgentDiagSpanHandler"

    def __init__(self, tracer_provider: trace.TracerProvider | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._table = StepTable(tracer_for(SCOPE, tracer_provider))

    @property
    def table(self) -> StepTable | None:
        return self._table

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        table = self._table
        if table is None:
            return
        try:
            table.enter(id_, bound_args, instance, parent_id)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("starting a LlamaIndex span", exc)

    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        table = self._table
        if table is None:
            return
        try:
            table.exit(id_, result=result)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending a LlamaIndex span", exc)

    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        table = self._table
        if table is None:
            return
        try:
            table.exit(id_, err=err)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending a LlamaIndex span", exc)

    def new_span(self, *args: Any, **kwargs: Any) -> None:  # the base class's bookkeeping is not used
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        """Detach: later notifications are ignored."""
        self._table = None


class AgentDiagEventHandler(BaseEventHandler):
    """A LlamaIndex event handler: a model call's end event hands its response to the :class:`StepTable`."""

    _table: StepTable | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "AgentDiagEventHandler"

    def __init__(self, table: StepTable, **data: Any) -> None:
        super().__init__(**data)
        self._table = table

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        table = self._table
        if table is None or not isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            return
        try:
            table.model_response(event.span_id, event.response)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("reading a LlamaIndex model response", exc)

    def close(self) -> None:
        self._table = None

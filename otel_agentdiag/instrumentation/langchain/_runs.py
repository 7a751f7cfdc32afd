"""The LangChain run table: which span each run id hangs under, and starting and ending what a run opens.

:class:`RunTable` is the state of :class:`~.callback.AgentDiagCallbackHandler` (its base class, so the hooks
reach it without a layer in between): one :class:`Run` per LangChain run in progress (the node its children
hang under, and its role), a run's iterations (one per model call: opened by a step of the graph node that calls
the model, joined by the steps of other nodes, such as the tool node running the calls it asked for; ended when
the next one opens or the run ends), the tool call ids that got a span, and the cleanup of whatever a run or
``close()`` leaves open.
What each span is called and carries comes from :mod:`._mapping`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Mapping
from typing import Any
from uuid import UUID

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag.instrumentation._base import error_type_of
from otel_agentdiag.instrumentation._framework import Node, SpanTree, run_span, tool_span
from otel_agentdiag.instrumentation._values import as_count
from otel_agentdiag.instrumentation.langchain._mapping import (
    ERROR_TYPE_TOOL_ERROR,
    ERROR_TYPE_TOOL_NOT_FOUND,
    conversation_of,
    error_tool_messages,
    llm_span,
    nonempty_str,
    run_name,
    stop_reason,
    tool_names,
)

__all__ = ["FOLD", "LLM", "ROOT", "STEP", "TOOL", "Run", "RunTable"]

ROOT, STEP, FOLD, LLM, TOOL = "root", "step", "fold", "llm", "tool"


class Run:
    """What the handler knows about one LangChain run: the node its children hang under, and its role."""

    __slots__ = ("node", "role", "start_ns")

    def __init__(self, node: Node, role: str) -> None:
        self.node = node
        self.role = role
        self.start_ns = time.time_ns()


class RunTable:
    """The spans of the LangChain runs in progress, keyed by run id. Thread-safe (one lock)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        super().__init__()
        self._tree = SpanTree(tracer)
        self._names: NameRegistry = default_registry
        self._runs: dict[UUID, Run] = {}
        self._lock = threading.Lock()
        self._enabled = True

    @property
    def open_spans(self) -> int:
        """How many LangChain runs are in progress (their spans not yet ended)."""
        with self._lock:
            return len(self._runs)

    def _take(self, run_id: UUID) -> Run | None:
        """Forget what the handler knew about the run ``run_id`` (it ended), and return it."""
        with self._lock:
            return self._runs.pop(run_id, None)

    # -- chains and LangGraph steps ------------------------------------------------------------------
    def _chain_start(
        self,
        serialized: Any,
        inputs: Any,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        name: Any,
    ) -> None:
        tree = self._tree
        parent = tree.get(parent_run_id) if parent_run_id is not None else None
        if parent is None or parent.kind == sc.KIND_TOOL:
            parent_key = parent_run_id if parent is not None else None
            run = self._start_run(run_id, parent_key, run_name(serialized, name), metadata)
            if run is not None and _content.enabled():
                run.capture(sc.CONTENT_INPUT_MESSAGES, inputs)
            return
        step = as_count(metadata.get("langgraph_step")) if metadata else None
        if parent.kind == sc.KIND_RUN and step is not None:
            graph_node = metadata.get("langgraph_node") if metadata else None
            self._start_step(run_id, parent, step, graph_node if isinstance(graph_node, str) else None)
            return
        # Prompt templates, RunnableSequence internals, LangGraph's inner chains, a subgraph: no span of their own.
        tree.alias(run_id, parent)
        with self._lock:
            self._runs[run_id] = Run(parent, FOLD)

    def _start_run(self, run_id: UUID, parent_key: UUID | None, name: str | None, metadata: Any) -> Node | None:
        span_name, attributes = run_span(name)  # not registered: a run_name is data ("Names" in .callback)
        node = self._tree.start(
            run_id,
            parent_key,
            kind=sc.KIND_RUN,
            name=span_name,
            attributes=attributes,
            conversation_id=conversation_of(metadata if isinstance(metadata, Mapping) else None),
            activate=False,
        )
        if node is None:
            return None
        node.extra["iterations"] = {}  # step number -> iteration node
        node.extra["calls"] = set()  # tool call ids that got a tool span
        node.extra["tools"] = frozenset()  # the tool names bound to the latest model call
        with self._lock:
            self._runs[run_id] = Run(node, ROOT)
        return node

    def _start_step(self, run_id: UUID, run: Node, step: int, graph_node: str | None = None) -> None:
        """A LangGraph node of ``run``: the iteration span of its step, started by the step's first node. One
        iteration is one model call and the tool calls it asked for: once the run knows which graph node calls the
        model, a step of another node (the tool node that runs the calls) joins the iteration still current."""
        finished: list[Node] = []
        with self._lock:
            iterations: dict[int, Node] = run.extra["iterations"]
            current: Node | None = run.extra.get("current")
            model_node = run.extra.get("model_node")
            joins = (
                step not in iterations
                and current is not None
                and not current.ended
                and model_node is not None
                and graph_node != model_node
            )
            if joins:
                iterations[step] = current  # type: ignore[assignment]
            seen: set[int] = set()
            for other, node in list(iterations.items()):
                if other != step and node.extra["open"] == 0 and node is not iterations.get(step):
                    iterations.pop(other)
                    if id(node) not in seen:
                        seen.add(id(node))
                        finished.append(node)
            iteration = iterations.get(step)
            if iteration is None:
                key: Hashable = ("agentdiag.iteration", run.key, step)
                index = run.extra.get("opened", 0)  # 0-based, as every integration's: LangGraph's steps skip
                run.extra["opened"] = index + 1
                iteration = self._tree.start_iteration(key, run.key, index)
                if iteration is None:
                    return
                iteration.extra["open"] = 0
                iterations[step] = iteration
                run.extra["current"] = iteration
            iteration.extra["open"] += 1
            self._runs[run_id] = Run(iteration, STEP)
        self._tree.alias(run_id, iteration)
        for node in finished:
            self._end_iteration(node)

    def _end_iteration(self, node: Node) -> None:
        self._tree.end(node.key, end_time=node.extra.get("last_end_ns"))

    def _chain_end(self, run_id: UUID, outputs: Any, error: BaseException | None) -> None:
        record = self._take(run_id)
        if record is None:
            return
        node = record.node
        if record.role == ROOT:
            if error is not None:
                if node.error_type is None:
                    node.error_type = error_type_of(error)
                node.stop_reason = stop_reason(error)
            elif node.stop_reason is None:
                node.stop_reason = sc.STOP_COMPLETED
            if error is None and _content.enabled():
                node.capture(sc.CONTENT_OUTPUT_MESSAGES, outputs)
            self._end_run(node, None if error is None else error_type_of(error))
        elif record.role == STEP:
            if error is not None and node.error_type is None:
                node.error_type = error_type_of(error)
            if error is None:
                with handle_internal_errors("reading a LangGraph step's tool answers"):
                    self._unrun_tool_calls(run_id, record, outputs)
            self._tree.forget(run_id)
            with self._lock:
                node.extra["open"] -= 1
                if node.extra["open"] == 0:
                    # Ended when the next step starts or the run ends, at this time: a node of this step that
                    # starts late (parallel tasks) still finds its iteration open.
                    node.extra["last_end_ns"] = time.time_ns()
        else:
            self._tree.forget(run_id)

    def _end_run(self, run: Node, leftover_error: str | None) -> None:
        """End ``run`` and, children first, whatever under it is still open: finished iterations at the time
        their last node ended, anything else with ``leftover_error``."""
        with self._lock:
            finished = {id(node) for node in run.extra.get("iterations", {}).values() if node.extra["open"] == 0}
            nodes: dict[int, Node] = {id(node): node for node in run.extra.get("iterations", {}).values()}
            for run_id, record in list(self._runs.items()):
                if record.node is run or any(ancestor is run for ancestor in record.node.ancestors()):
                    del self._runs[run_id]
                    if record.node is not run:
                        nodes[id(record.node)] = record.node
            run.extra["iterations"] = {}
            run.extra.pop("current", None)

        def depth(node: Node) -> int:
            return sum(1 for _ in node.ancestors())

        for node in sorted(nodes.values(), key=depth, reverse=True):
            if id(node) in finished:
                self._end_iteration(node)
            else:
                self._tree.end(node.key, error_type=leftover_error)
        self._tree.end(run.key)

    def _unrun_tool_calls(self, run_id: UUID, record: Run, outputs: Any) -> None:
        """Tool calls a step answered with an error ``ToolMessage`` without running a tool (an unknown tool
        name): a tool span each, from the step's start to now."""
        iteration = record.node
        run = iteration.nearest(sc.KIND_RUN)
        if run is None:
            return
        for message in error_tool_messages(outputs):
            call_id = nonempty_str(getattr(message, "tool_call_id", None))
            if call_id is None:
                continue
            with self._lock:
                seen: set[str] = run.extra["calls"]
                if call_id in seen:
                    continue
                seen.add(call_id)
                declared: frozenset[str] = run.extra["tools"]
            tool = nonempty_str(getattr(message, "name", None))
            key = ("agentdiag.tool_message", run_id, call_id)
            name, attributes = tool_span(tool, call_id)
            node = self._tree.start(
                key,
                iteration.key,
                kind=sc.KIND_TOOL,
                name=name,
                attributes=attributes,
                start_time=record.start_ns,
                activate=False,
            )
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_TOOL_RESULT, message)  # what the model got back instead of a result
            unknown = declared and tool not in declared
            self._tree.end(key, error_type=ERROR_TYPE_TOOL_NOT_FOUND if unknown else ERROR_TYPE_TOOL_ERROR)

    # -- model calls ----------------------------------------------------------------------------------
    def _llm_start(
        self, operation: str, run_id: UUID, parent_run_id: UUID | None, metadata: Any, params: Any
    ) -> Node | None:
        metadata = metadata if isinstance(metadata, Mapping) else {}
        params = params if isinstance(params, Mapping) else {}
        name, attributes = llm_span(operation, metadata, params)
        node = self._tree.start(
            run_id,
            parent_run_id,
            kind=sc.KIND_LLM,
            name=name,
            attributes=attributes,
            span_kind=SpanKind.CLIENT,
        )
        if node is None:
            return None
        with self._lock:
            self._runs[run_id] = Run(node, LLM)
        graph_node = metadata.get("langgraph_node")
        if isinstance(graph_node, str):
            run = node.nearest(sc.KIND_RUN)
            if run is not None and "model_node" not in run.extra:
                run.extra["model_node"] = graph_node  # the node whose steps open iterations from now on
        tools = tool_names(params.get("tools"))
        if tools:
            # The tools bound to this call are the agent's declared tools: their names are code.
            self._names.register_valid("tool", tools)
            run = node.nearest(sc.KIND_RUN)
            if run is not None:
                run.extra["tools"] = frozenset(tools)
        return node

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> int:
        """Stop mapping and end every span still open with ``error.type = agentdiag.uninstrumented`` (iterations
        whose nodes all ended end normally). Returns how many were open."""
        self._enabled = False
        with self._lock:
            runs = [record.node for record in self._runs.values() if record.role == ROOT]
            finished = [
                node
                for run in runs
                for node in run.extra.get("iterations", {}).values()
                if node.extra["open"] == 0 and not node.ended
            ]
            self._runs.clear()
        for node in finished:
            self._end_iteration(node)
        return self._tree.end_all(sc.ERROR_TYPE_UNINSTRUMENTED)

"""Maps CrewAI's events to OpenTelemetry GenAI spans, parented by the ids CrewAI gives its events.

CrewAI announces every step of a crew on its event bus: ``crewai_event_bus.emit(source, event)``. Before
dispatching, the bus gives each event its ``event_id``, its ``parent_event_id`` (the innermost open scope, kept
in a :class:`~contextvars.ContextVar`, so ``asyncio.gather`` of two kickoffs and tools run on worker threads each
see their own) and, for an event that closes a scope, the ``started_event_id`` it closes. :class:`CrewAISpans`
reads each event as ``emit`` returns, on the emitting thread and in its context, and builds the tree from those
ids with :class:`~otel_agentdiag.instrumentation._framework.SpanTree` (never from the ambient context):

==============================================  ========================================  ===========================
CrewAI event (started → completed / failed)     OpenTelemetry span                        notes
==============================================  ========================================  ===========================
``agent_execution_*`` (an agent doing a task)   ``invoke_agent {role}`` (run)             one per task attempt
``lite_agent_execution_*`` (``Agent.kickoff``)  ``invoke_agent {role}`` (run)
``crew_kickoff_*``                              ``invoke_agent {crew name}`` (run)        only for a crew of several
                                                                                          agents or tasks (their
                                                                                          runs nest in it)
``llm_call_*`` in an agent's loop               ``agent.iteration`` + ``chat {model}``    a turn: a model call and
                                                                                          the tools it asked for
``llm_call_*`` anywhere else                    ``chat {model}`` (llm, CLIENT)            usage, finish reason
``tool_usage_started`` → ``finished``/``error`` ``execute_tool {tool}`` (tool)            error: the exception class
any other scope (task, flow, memory, ...)       none: its children go to its parent
==============================================  ========================================  ===========================

**Iterations.** CrewAI has no event for a turn of its agent loop; each model call its loop makes (a
``llm_call_started`` directly inside an agent's run) ends the run's previous iteration and starts the next
(``agentdiag.iteration.index`` 0, 1, ...); the tool calls that follow, until the next model call, are in it.
A model call inside a tool (a delegation, a RAG tool) is a child of that tool, not a turn of the outer run.

**One owner per LLM call.** A model call's step is made active in the context the call is made in (the event is
emitted there, just before the request): our OpenAI or Anthropic instrumentation called inside enriches its span
instead of starting a second one. CrewAI's own event reports usage, finish reason and response id, so the span is
complete without them too.

**Failures.** A tool that raises: CrewAI catches it, tells the model, and reports ``tool_usage_error`` with the
exception: status ERROR, ``error.type`` = its class. A model call's or an agent's failure event names the error
as text only; it is emitted while CrewAI handles the exception, whose class is then the ``error.type``. A tool CrewAI
reports failed without an exception (unknown tool, usage limit) is ``crewai.{reason}``. A failed attempt of an
agent's task is a failed run; CrewAI's retry is a run of its own.

Nothing an event carries as content (prompts, backstory, task description, messages, tool arguments and results,
outputs) or as an id of CrewAI's (event, agent, task, crew ids, fingerprints) is put on a span; with content
capture on (``configure(capture_content=True)``) content goes to :meth:`Node.capture` (see :mod:`._mapping`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection, Hashable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag.instrumentation._framework import Node, SpanTree
from otel_agentdiag.instrumentation.crewai._mapping import (
    agent_role,
    capture_end,
    capture_start,
    crew_is_a_run,
    failure_type,
    llm_end_attributes,
    llm_span,
    register_agent,
    register_offered_tools,
    run_span,
    tool_failure_type,
    tool_span,
)

__all__ = ["CrewAISpans"]

_MAX_DEPTH = 256
"""Scopes looked through to find a step's nearest span (CrewAI bounds its scope stack at 100)."""

_RUN_ENDS = frozenset(
    {
        "agent_execution_completed",
        "agent_execution_error",
        "lite_agent_execution_completed",
        "lite_agent_execution_error",
        "crew_kickoff_completed",
        "crew_kickoff_failed",
    }
)
_FAILED = frozenset(
    {
        "agent_execution_error",
        "lite_agent_execution_error",
        "crew_kickoff_failed",
        "llm_call_failed",
        "tool_usage_error",
    }
)


class CrewAISpans:
    """The span table behind :class:`~otel_agentdiag.instrumentation.crewai.CrewAIInstrumentor`: call
    :meth:`on_event` with each event CrewAI emits, after the bus has prepared it.

    ``starts`` and ``ends`` are CrewAI's sets of scope-opening and scope-closing event types
    (``crewai.events.event_context.SCOPE_STARTING_EVENTS`` / ``SCOPE_ENDING_EVENTS``). Thread-safe; never raises
    into CrewAI: a failure is logged by type and the step stays untraced.
    """

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        starts: Collection[str],
        ends: Collection[str],
        names: NameRegistry | None = None,
    ) -> None:
        self._tree = SpanTree(tracer)
        self._names = names or default_registry
        self._starts = frozenset(starts)
        self._ends = frozenset(ends)
        self._through: dict[str, str | None] = {}
        """Scopes that have no span of their own (a task, the executor's flow, ...): event id → parent event id."""
        self._lock = threading.Lock()
        self._enabled = True
        self._handlers: dict[str, Callable[[Any, Any], None]] = {
            "agent_execution_started": self._start_agent,
            "lite_agent_execution_started": self._start_lite_agent,
            "crew_kickoff_started": self._start_crew,
            "llm_call_started": self._start_llm,
            "tool_usage_started": self._start_tool,
        }

    @property
    def open_spans(self) -> int:
        """How many CrewAI steps are in progress (their spans not yet ended)."""
        return len(self._tree)

    # -- the bus ----------------------------------------------------------------------------------------
    def emit_wrapper(self, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A ``wrapt`` wrapper for ``CrewAIEventsBus.emit(source, event)``: the bus prepares and dispatches the
        event as before, and what it returns or raises is passed on unchanged; then the event is mapped."""
        result = wrapped(*args, **kwargs)
        if self._enabled:
            try:
                source = args[0] if args else kwargs.get("source")
                event = args[1] if len(args) > 1 else kwargs.get("event")
                self.on_event(source, event)
            except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
                log_internal_error("mapping a CrewAI event", exc)
        return result

    def on_event(self, source: Any, event: Any) -> None:
        """Map one prepared event (its ``event_id``, ``parent_event_id`` and ``started_event_id`` set)."""
        if not self._enabled or event is None:
            return
        try:
            kind = event.type
            if kind in self._starts:
                handler = self._handlers.get(kind)
                if handler is None:
                    with self._lock:
                        self._through[event.event_id] = event.parent_event_id
                else:
                    handler(source, event)
            elif kind in self._ends:
                self._end(event)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("mapping a CrewAI event", exc)

    # -- finding a step's parent ------------------------------------------------------------------------
    def _resolve(self, event_id: str | None) -> Node | None:
        """The node of the nearest scope, from ``event_id`` up, that has a span; None at the top."""
        tree = self._tree
        for _ in range(_MAX_DEPTH):
            if event_id is None:
                return None
            node = tree.get(event_id)
            if node is not None:
                return node
            with self._lock:
                if event_id not in self._through:
                    return None
                event_id = self._through[event_id]
        return None

    def _parent_in_loop(self, parent: Node | None, *, turn: bool) -> Hashable | None:
        """The key a step under ``parent`` is started under: a run's current iteration for a step of its loop
        (``turn``: a model call, which first starts the run's next iteration), else ``parent`` itself."""
        if parent is None:
            return None
        if parent.kind != sc.KIND_RUN:
            return parent.key
        if turn:
            return self._next_iteration(parent)
        current = parent.extra.get("iteration")
        return current if current is not None else parent.key

    def _next_iteration(self, run: Node) -> Hashable:
        with run.tree_lock:
            previous = run.extra.get("iteration")
            index = run.extra.get("turns", 0)
            run.extra["turns"] = index + 1
            key = ("iteration", run.key, index)
            run.extra["iteration"] = key
        if previous is not None:
            self._tree.end(previous)
        self._tree.start_iteration(key, run.key, index)
        return key

    # -- starts -----------------------------------------------------------------------------------------
    def _open_run(self, event: Any, role: str | None, llm: Any) -> None:
        parent = self._resolve(event.parent_event_id)
        name, attributes = run_span(role, llm)
        node = self._tree.start(
            event.event_id, self._parent_in_loop(parent, turn=False), kind=sc.KIND_RUN, name=name, attributes=attributes
        )
        if node is not None:
            capture_start(node, event)

    def _start_agent(self, source: Any, event: Any) -> None:
        agent = getattr(event, "agent", None) or source
        role = agent_role(agent)
        tools = getattr(event, "tools", None) or getattr(agent, "tools", None) or ()
        register_agent(self._names, role, tools)
        self._open_run(event, role, getattr(agent, "llm", None))

    def _start_lite_agent(self, source: Any, event: Any) -> None:
        role = agent_role(getattr(event, "agent_info", None)) or agent_role(source)
        register_agent(self._names, role, getattr(event, "tools", None) or ())
        self._open_run(event, role, getattr(source, "llm", None))

    def _start_crew(self, source: Any, event: Any) -> None:
        crew = getattr(event, "crew", None) or source
        if not crew_is_a_run(crew):
            with self._lock:
                self._through[event.event_id] = event.parent_event_id
            return
        name = getattr(crew, "name", None) or getattr(event, "crew_name", None)
        name = name if isinstance(name, str) and name else None
        register_agent(self._names, name, ())
        self._open_run(event, name, None)

    def _start_llm(self, source: Any, event: Any) -> None:
        register_offered_tools(self._names, getattr(event, "tools", None))
        parent = self._resolve(event.parent_event_id)
        name, attributes = llm_span(event, source)
        node = self._tree.start(
            event.event_id,
            self._parent_in_loop(parent, turn=True),
            kind=sc.KIND_LLM,
            name=name,
            attributes=attributes,
            span_kind=SpanKind.CLIENT,
        )
        if node is not None:
            capture_start(node, event)

    def _start_tool(self, source: Any, event: Any) -> None:
        parent = self._resolve(event.parent_event_id)
        name, attributes = tool_span(event)
        node = self._tree.start(
            event.event_id,
            self._parent_in_loop(parent, turn=False),
            kind=sc.KIND_TOOL,
            name=name,
            attributes=attributes,
        )
        if node is not None:
            capture_start(node, event)

    # -- ends -------------------------------------------------------------------------------------------
    def _end(self, event: Any) -> None:
        key = event.started_event_id
        if key is None:
            return
        with self._lock:
            if key in self._through:
                del self._through[key]
                return
        node = self._tree.get(key)
        if node is None:
            return
        kind = event.type
        error_type: str | None = None
        attributes: dict[str, Any] = {}
        if kind in _FAILED:
            handled = sys.exc_info()[1]  # CrewAI emits a failure event while it handles the exception
            error_type = failure_type(getattr(event, "error", None), handled, f"crewai.{kind}")
        if kind == "llm_call_completed":
            attributes = llm_end_attributes(event)
        elif kind == "tool_usage_finished":
            error_type = tool_failure_type(event)
        capture_end(node, event)
        if kind in _RUN_ENDS and node.kind == sc.KIND_RUN:
            iteration = node.extra.get("iteration")
            if iteration is not None:
                self._tree.end(iteration)
            node.stop_reason = sc.STOP_ERROR if error_type is not None else sc.STOP_COMPLETED
        self._tree.end(key, attributes=attributes, error_type=error_type)

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> int:
        """Stop mapping and end every span still open with ``error.type = agentdiag.uninstrumented``.
        Returns how many were open."""
        self._enabled = False
        with self._lock:
            self._through.clear()
        return self._tree.end_all(sc.ERROR_TYPE_UNINSTRUMENTED)

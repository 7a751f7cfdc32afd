"""What Strands' own spans lack at start: their session, the names an agent declares, each cycle's index in its run.

Strands Agents emits GenAI-convention spans through its public tracer (``strands.telemetry.Tracer``):
``invoke_agent {agent}`` → ``execute_event_loop_cycle`` per cycle of its event loop → ``chat`` and
``execute_tool {tool}``. The GenAI adapter maps them (a cycle, marked by Strands' ``event_loop.cycle_id`` key, is
an iteration). One wrapper per ``start_*_span`` method of the tracer adds what the spans do not say when they start:

- **the session.** Strands sets the agent's ``trace_attributes`` (``session.id``, the conversation) on each span
  only after starting it, so the sequencer, which numbers spans per session at start, would see none. While the
  tracer starts a span, the wrapper puts the conversation (``gen_ai.conversation.id``, else ``session.id`` of
  those attributes) in the OpenTelemetry context, where the sequencer reads it as it reads an ``agent_run``'s;
- **names** (``start_agent_span``): the agent's ``name`` and its tools' names (the framework's definitions, as it
  passes them) are registered as code;
- **cycle indexes** (``start_event_loop_cycle_span``): ``agentdiag.iteration.index`` 0, 1, ... per run span,
  counted in :class:`CycleIndexes` (Strands numbers its cycles only by a random id).

What the tracer returns or raises is passed on unchanged; a failure of ours is logged, never raised.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.context import CONVERSATION_ID_KEY
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.names import default_registry

__all__ = ["AGENT_SPAN", "CUSTOM_ATTRIBUTES_AT", "CYCLE_SPAN", "CycleIndexes", "span_start_wrapper"]

AGENT_SPAN = "start_agent_span"
CYCLE_SPAN = "start_event_loop_cycle_span"
CUSTOM_ATTRIBUTES_AT: dict[str, int] = {
    AGENT_SPAN: 4,
    CYCLE_SPAN: 3,
    "start_model_invoke_span": 3,
    "start_tool_call_span": 2,
}
"""The tracer methods wrapped, and where each takes ``custom_trace_attributes`` when passed by position."""


class CycleIndexes:
    """The next cycle index of each open run span (weakly keyed: a run's count goes with its span). Thread-safe."""

    def __init__(self) -> None:
        self._next: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def take(self, run_span: Any) -> int:
        """The index of the run's next cycle (0 for its first)."""
        with self._lock:
            index = self._next.get(run_span, 0)
            self._next[run_span] = index + 1
        return index


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], name: str, position: int) -> Any:
    return kwargs[name] if name in kwargs else (args[position] if len(args) > position else None)


def _conversation(custom: Any) -> str | None:
    """The run's conversation in the agent's ``trace_attributes``: ``gen_ai.conversation.id``, else ``session.id``."""
    if not isinstance(custom, Mapping):
        return None
    for key in (sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID):
        value = custom.get(key)
        if type(value) is str and value:
            return value
    return None


def _register_names(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``start_agent_span(messages, agent_name, model_id=None, tools=None, ...)``: the agent's ``name`` and the
    tool names its registry declares are code, not data."""
    default_registry.register_valid("agent", [_argument(args, kwargs, "agent_name", 1)])
    tools = _argument(args, kwargs, "tools", 3)
    if isinstance(tools, (list, tuple)):
        default_registry.register_valid("tool", tools)


def _number_cycle(indexes: CycleIndexes, span: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``start_event_loop_cycle_span(invocation_state, messages, parent_span=None, ...)``: the cycle's index within
    its run (the parent span Strands gives, else the invocation's)."""
    parent = _argument(args, kwargs, "parent_span", 2)
    if parent is None:
        state = _argument(args, kwargs, "invocation_state", 0)
        parent = state.get("event_loop_parent_span") if isinstance(state, dict) else None
    if parent is not None and span is not None and span.is_recording():
        span.set_attribute(sc.AGENTDIAG_ITERATION_INDEX, indexes.take(parent))


def span_start_wrapper(method: str, indexes: CycleIndexes) -> Any:
    """A wrapt wrapper for the tracer's ``method`` (one of :data:`CUSTOM_ATTRIBUTES_AT`): see the module doc."""
    position = CUSTOM_ATTRIBUTES_AT[method]

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        token = None
        with handle_internal_errors("reading a Strands span's run"):
            if method == AGENT_SPAN:
                _register_names(args, kwargs)
            conversation = _conversation(_argument(args, kwargs, "custom_trace_attributes", position))
            if conversation is not None:
                token = otel_context.attach(otel_context.set_value(CONVERSATION_ID_KEY, conversation))
        try:
            span = wrapped(*args, **kwargs)
        finally:
            if token is not None:
                otel_context.detach(token)
        if method == CYCLE_SPAN:
            with handle_internal_errors("numbering a Strands event-loop cycle"):
                _number_cycle(indexes, span, args, kwargs)
        return span

    return wrapper

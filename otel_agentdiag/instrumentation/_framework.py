"""What every framework integration shares: a span tree built from the framework's own ids.

Agent frameworks (the OpenAI Agents SDK, LangChain/LangGraph) tell an observer when each of their steps starts
and ends, with the step's id and its parent's id. :class:`SpanTree` turns those notifications into OpenTelemetry
spans whose parents come from those ids, never from the ambient context, so concurrent runs, ``asyncio.gather``
fan-out and callbacks delivered on other threads cannot misparent a span.

**Roll-ups that cannot double count.** Token usage (``gen_ai.usage.*``) is recorded only on leaf LLM spans.
When an LLM node ends, its usage is added to every open ancestor; run and iteration spans carry the sums under
``agentdiag.usage.*`` (:data:`~otel_agentdiag.semconv.AGENTDIAG_USAGE_PREFIX`), a namespace no backend sums with
``gen_ai.usage.*``. A roll-up is the sum of the usage its leaves *reported*: a leaf with no usage adds nothing,
and a node none of whose leaves reported usage carries no roll-up (never a made-up 0). Cost follows the same
rule: an LLM leaf gets ``agentdiag.cost.usd`` as it ends (when the price table prices it, :mod:`otel_agentdiag.cost`)
and its runs and iterations ``agentdiag.usage.cost.usd``, only when at least one leaf below had a cost. A run checks
the configured budget each time a leaf adds to it.

**Reaching code inside a step.** A framework step is made "active" in a :class:`~contextvars.ContextVar` set
without a token (so ending it in another context never fails, unlike ``context.detach``). Our client
instrumentations and manual wrappers consult it: a model call inside an active LLM node *enriches* that node's
span instead of starting a second one (one owner per LLM call), and a span started inside an active step is
parented to it and carries its conversation id, unless an OpenTelemetry span was made current after the step
started (that span is closer, and wins).

**Correlation ids.** The framework's ids that name a conversation, a tool call or a response are kept beside
the span for otel-agentdiag's redactors (``_internal/ids.py``), never set on it as raw attributes.

**Content.** With content capture on (``configure(capture_content=True)``) an integration hands what its
framework reports as content to :meth:`Node.capture`, never to a span attribute. An LLM step's state is made
with ``content=False``: the framework's report is the one record of the call's content, so a client
instrumentation enriching the step's span captures nothing of its own (and a framework switch that withholds
content, like the Agents SDK's ``trace_include_sensitive_data=False``, withholds it from the client too).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import (
    ACTIVE_FRAMEWORK_STEP as _ACTIVE,
)
from otel_agentdiag._internal.context import (
    AGENT_NAME_KEY,
    CONVERSATION_ID_KEY,
    ROLLUP_KEY,
    current_conversation_id,
    framework_parent,
)
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.spans import set_own_attributes
from otel_agentdiag.cost.pricing import leaf_cost
from otel_agentdiag.cost.rollup import ROLLUP_KEYS, USAGE_KEYS, Rollup
from otel_agentdiag.instrumentation._base import LLMCallState
from otel_agentdiag.instrumentation._values import put

__all__ = [
    "ROLLUP_KEYS",
    "USAGE_KEYS",
    "Node",
    "SpanTree",
    "framework_parent",
    "run_span",
    "tool_span",
]

_ROLLUP_KINDS = frozenset({sc.KIND_RUN, sc.KIND_ITERATION})


def run_span(name: str | None) -> tuple[str, dict[str, Any]]:
    """The name and start attributes of a framework run's ``invoke_agent`` span (``name``: the agent's, if any)."""
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT}
    if name is None:
        return sc.OP_INVOKE_AGENT, attributes
    attributes[sc.GEN_AI_AGENT_NAME] = name
    return f"{sc.OP_INVOKE_AGENT} {name}", attributes


def tool_span(tool: str | None, call_id: str | None) -> tuple[str, dict[str, Any]]:
    """The name and start attributes of a framework's ``execute_tool`` span of a function tool."""
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_TYPE: "function"}
    put(attributes, sc.GEN_AI_TOOL_NAME, tool)
    put(attributes, sc.GEN_AI_TOOL_CALL_ID, call_id)
    return (sc.OP_EXECUTE_TOOL if tool is None else f"{sc.OP_EXECUTE_TOOL} {tool}"), attributes


class Node:
    """One framework step and its span."""

    __slots__ = (
        "aliases",
        "ambient",
        "context",
        "conversation_id",
        "ended",
        "error_type",
        "extra",
        "key",
        "kind",
        "llm",
        "parent",
        "prev_active",
        "span",
        "stop_reason",
        "sums",
        "tree_lock",
    )

    def __init__(
        self,
        key: Hashable,
        kind: str,
        parent: Node | None,
        conversation_id: str | None,
        tree_lock: threading.Lock | None = None,
    ) -> None:
        self.key = key
        self.tree_lock = tree_lock or threading.Lock()
        self.aliases: list[Hashable] = []
        self.kind = kind
        self.parent = parent
        self.conversation_id = conversation_id
        self.span: trace.Span = trace.INVALID_SPAN
        self.context: otel_context.Context = otel_context.Context()
        self.ambient: trace.Span | None = None
        self.prev_active: Node | None = None
        self.llm: LLMCallState | None = None
        self.sums: Rollup = Rollup(None, None if parent is None else parent.sums, is_run=kind == sc.KIND_RUN)
        """The usage and cost of the LLM leaves below (its roll-ups, and a run's budget). Chained to the parent's;
        a root's is chained, once started, to the manual run or iteration it was opened in, if any."""
        self.ended = False
        self.error_type: str | None = None
        self.stop_reason: str | None = None
        self.extra: dict[str, Any] = {}
        """Per-integration state (the Agents SDK keeps pending tool call ids here)."""

    def add_span_usage(self, span: Any) -> None:
        """An LLM span (this step's own, or one another instrumentation started inside it) is ending, its cost
        already set: its usage and cost roll up here and in every enclosing step."""
        self.sums.add_span_usage(span)

    def capture(self, role: str, value: Any) -> None:
        """Record ``value`` as this step's ``role`` content (a ``semconv.CONTENT_*`` name) while its span is
        open. Never raises; callers check ``_internal.content.enabled()`` first so nothing is built when
        capture is off."""
        if not self.ended:
            _content.capture(self.span, role, value)

    def ancestors(self) -> Iterable[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def nearest(self, kind: str) -> Node | None:
        """This node or its closest ancestor of ``kind``."""
        node: Node | None = self
        while node is not None:
            if node.kind == kind:
                return node
            node = node.parent
        return None


class SpanTree:
    """OpenTelemetry spans for one framework's steps, keyed by the framework's own ids.

    Thread-safe. Every method swallows (and logs by type) its own failures: a framework callback that reaches
    it never sees an exception from telemetry.
    """

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._nodes: dict[Hashable, Node] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, key: Hashable) -> Node | None:
        return self._nodes.get(key)

    def alias(self, key: Hashable, node: Node) -> None:
        """Let ``key`` name an existing node (a framework step that this integration folds into another)."""
        with self._lock:
            self._nodes[key] = node
            node.aliases.append(key)

    def forget(self, key: Hashable) -> Node | None:
        with self._lock:
            return self._nodes.pop(key, None)

    # -- starting ---------------------------------------------------------------------------------------
    def new_node(
        self,
        key: Hashable,
        parent_key: Hashable | None,
        *,
        kind: str,
        conversation_id: str | None = None,
    ) -> Node:
        """A node whose span is not started yet (see :meth:`open`)."""
        parent = self._nodes.get(parent_key) if parent_key is not None else None
        if conversation_id is None and parent is not None:
            conversation_id = parent.conversation_id
        node = Node(key, kind, parent, conversation_id, self._lock)
        with self._lock:
            self._nodes[key] = node
        return node

    def open(
        self,
        node: Node,
        name: str,
        attributes: dict[str, Any],
        *,
        span_kind: SpanKind = SpanKind.INTERNAL,
        start_time: int | None = None,
        activate: bool = True,
    ) -> None:
        """Start ``node``'s span: parented to its parent node's span, else to the ambient context (resolved
        through an enclosing framework step). ``activate`` makes it the active step in this context."""
        try:
            ambient = otel_context.get_current()
            if node.parent is not None:
                ctx = node.parent.context
            else:
                step = framework_parent(ambient)
                ctx = ambient if step is None else step.context
                if node.conversation_id is None:
                    node.conversation_id = current_conversation_id(ctx)
                outer = otel_context.get_value(ROLLUP_KEY, ctx)
                if isinstance(outer, Rollup):
                    node.sums.parent = outer  # a root inside a manual run or iteration: its leaves count there too
            attributes[sc.AGENTDIAG_KIND] = node.kind
            if node.conversation_id is not None:
                attributes.setdefault(sc.GEN_AI_CONVERSATION_ID, node.conversation_id)
            # Correlation ids beside the span, for our redactors; never onto it (_internal/ids.py).
            span = _ids.start_span(
                self._tracer, name, context=ctx, kind=span_kind, attributes=attributes, start_time=start_time
            )
            node.span = node.sums.span = span
            child = trace.set_span_in_context(span, ctx)
            if node.conversation_id is not None:
                child = otel_context.set_value(CONVERSATION_ID_KEY, node.conversation_id, child)
            agent = attributes.get(sc.GEN_AI_AGENT_NAME)
            if node.kind == sc.KIND_RUN and type(agent) is str:
                child = otel_context.set_value(AGENT_NAME_KEY, agent, child)  # its model and tool calls name it
            node.context = child
            if node.kind == sc.KIND_LLM:
                node.llm = LLMCallState(span, owns=False, content=False)
            if activate:
                node.ambient = trace.get_current_span(ambient)
                node.prev_active = _ACTIVE.get()
                _ACTIVE.set(node)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("starting a framework span", exc)

    def start(
        self,
        key: Hashable,
        parent_key: Hashable | None,
        *,
        kind: str,
        name: str,
        attributes: dict[str, Any],
        span_kind: SpanKind = SpanKind.INTERNAL,
        conversation_id: str | None = None,
        start_time: int | None = None,
        activate: bool = True,
    ) -> Node | None:
        """:meth:`new_node` and :meth:`open` in one step."""
        try:
            node = self.new_node(key, parent_key, kind=kind, conversation_id=conversation_id)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("starting a framework span", exc)
            return None
        self.open(node, name, attributes, span_kind=span_kind, start_time=start_time, activate=activate)
        return node

    def start_iteration(self, key: Hashable, run_key: Hashable, index: int) -> Node | None:
        """An ``agent.iteration`` span (0-based ``index``) under the run ``run_key``. Never made active: an
        iteration spans several of the framework's contexts (the model call's, each tool's)."""
        attributes = {sc.AGENTDIAG_ITERATION_INDEX: index}
        return self.start(
            key, run_key, kind=sc.KIND_ITERATION, name=sc.ITERATION_SPAN_NAME, attributes=attributes, activate=False
        )

    # -- ending -----------------------------------------------------------------------------------------
    def end(
        self,
        key: Hashable,
        *,
        attributes: Mapping[str, Any] | None = None,
        error_type: str | None = None,
        end_time: int | None = None,
    ) -> Node | None:
        """End the node ``key`` names (once; later calls return ``None``).

        ``error_type`` marks the span failed: status ERROR without a description, ``error.type`` and an
        ``exception`` event carrying the type only. An LLM node's usage (read from its span, where the
        integration and any client instrumentation put it) is added to its open ancestors; run and iteration
        nodes get their roll-ups.
        """
        with self._lock:
            node = self._nodes.pop(key, None)
            if node is None or node.ended:
                return None
            node.ended = True
            # Aliases of this node go with it.
            for other in node.aliases:
                if self._nodes.get(other) is node:
                    del self._nodes[other]
        try:
            self._finish(node, attributes, error_type, end_time)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending a framework span", exc)
        return node

    def _finish(
        self,
        node: Node,
        attributes: Mapping[str, Any] | None,
        error_type: str | None,
        end_time: int | None,
    ) -> None:
        span = node.span
        recording = span.is_recording()
        if attributes and recording:
            _ids.set_attributes(span, attributes)  # response and tool call ids beside the span
        if node.kind == sc.KIND_LLM:
            if recording:
                leaf_cost(span)  # before it rolls up and ends: its agentdiag.cost.usd, when priced
            if node.parent is not None:
                node.parent.add_span_usage(span)
        elif node.kind in _ROLLUP_KINDS and recording:
            rollups = node.sums.attributes()
            if rollups:
                set_own_attributes(span, rollups)
        if error_type is None:
            error_type = node.error_type
        if error_type is not None and recording:
            span.set_attribute(sc.ERROR_TYPE, error_type)
            span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type})
            span.set_status(Status(StatusCode.ERROR))
        if node.stop_reason is not None and recording:
            span.set_attribute(sc.AGENTDIAG_STOP_REASON, node.stop_reason)
        if node.llm is not None:
            node.llm._claim_end()
        span.end(end_time=end_time)
        if _ACTIVE.get() is node:
            prev = node.prev_active
            while prev is not None and prev.ended:
                prev = prev.parent
            _ACTIVE.set(prev)

    def end_all(self, error_type: str) -> int:
        """End every open span with ``error_type`` (the integration is being removed mid-run); children first.
        Returns how many were ended."""
        with self._lock:
            # One key per open node (its own, or an alias when an integration dropped its own key).
            keyed: dict[int, tuple[Hashable, Node]] = {}
            for key, node in self._nodes.items():
                if id(node) not in keyed or key == node.key:
                    keyed[id(node)] = (key, node)

        def depth(item: tuple[Hashable, Node]) -> int:
            return sum(1 for _ in item[1].ancestors())

        ended = 0
        for key, _node in sorted(keyed.values(), key=depth, reverse=True):
            if self.end(key, error_type=error_type) is not None:
                ended += 1
        return ended

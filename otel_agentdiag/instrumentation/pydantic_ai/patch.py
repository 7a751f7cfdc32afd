"""The iteration spans Pydantic AI has none of, and the names its agents declare.

Pydantic AI runs an agent as a graph of nodes: ``UserPromptNode`` → (``ModelRequestNode`` → ``CallToolsNode``)* →
``End``. Each model request/response step (a ``ModelRequestNode`` and the ``CallToolsNode`` that handles its
response) becomes one ``agent.iteration`` span (kind ``iteration``, ``agentdiag.iteration.index`` from 0 per run),
current while both nodes run, so the framework's own ``chat`` and ``execute_tool`` spans nest under it. It
carries the run's ``gen_ai.conversation.id`` (``ctx.conversation_id``) as the framework's spans do, so it is
numbered and filed in the run's session.

The hook is public: the ``wrap_node_run`` capability hook (``pydantic_ai.capabilities.AbstractCapability``),
wrapped on the framework's ``Instrumentation`` capability, the one ``Agent.instrument_all()`` adds to every run,
so iteration spans exist exactly where the framework's own spans do. A run's state lives in :class:`Iterations`,
keyed by the run's ``run_id``, bounded.

An iteration's roll-ups (``agentdiag.usage.input_tokens`` / ``output_tokens``) are the growth of the run's
``ctx.usage`` over the step: the same counts the step's ``chat`` span reports as its leaf usage; a count that did
not grow is left out (never a made-up 0).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.context import CONVERSATION_ID_KEY
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._base import error_type_of

__all__ = ["MAX_OPEN_RUNS", "Iterations", "agent_tool_names", "register_agent_names"]

MAX_OPEN_RUNS = 4096
"""Runs with an iteration open at once; past it the oldest open iteration is ended (a run abandoned
mid-step, e.g. an ``agent.iter()`` loop left early, never holds its span for ever)."""

_USAGE = ("input_tokens", "output_tokens")


class _Open:
    __slots__ = ("node", "span", "token", "usage")

    def __init__(self, span: trace.Span, usage: tuple[int, ...], node: Any) -> None:
        self.span = span
        self.usage = usage
        self.node = node
        """The ``ModelRequestNode`` that opened it (both hooks see the same node object)."""
        self.token: contextvars.Token[otel_context.Context] | None = None
        """The context token when :meth:`Iterations.before` made it current (streamed runs), else None."""


def _usage_of(ctx: Any) -> tuple[int, ...]:
    usage = getattr(ctx, "usage", None)
    values = tuple(getattr(usage, key, 0) for key in _USAGE)
    return tuple(v if type(v) is int else 0 for v in values)


class Iterations:
    """The open iteration of each run (see the module doc). Thread-safe; never raises into the agent."""

    def __init__(self, tracer: trace.Tracer, max_open: int = MAX_OPEN_RUNS) -> None:
        self.tracer = tracer
        self.max_open = max_open
        self._open: dict[Any, _Open] = {}
        self._index: dict[Any, int] = {}
        self._lock = threading.Lock()
        self.evicted = 0
        """Iterations ended early because :data:`MAX_OPEN_RUNS` runs had one open."""

    @staticmethod
    def _key(ctx: Any) -> Any:
        run_id = getattr(ctx, "run_id", None)
        return run_id if type(run_id) is str else id(ctx)

    def enter(self, ctx: Any, node: Any) -> trace.Span | None:
        """Before a node runs: the iteration span to make current around it (a ``ModelRequestNode`` opens one,
        a ``CallToolsNode`` continues its step's), or None (any other node)."""
        from pydantic_ai import CallToolsNode, ModelRequestNode

        key = self._key(ctx)
        if isinstance(node, ModelRequestNode):
            with self._lock:
                previous = self._open.get(key)
                if previous is not None and previous.node is node:  # opened by the other hook for this node
                    return previous.span
                previous = self._open.pop(key, None)
                index = self._index.get(key, -1) + 1
                self._index[key] = index
            if previous is not None:  # a step that had no CallToolsNode (a redirected graph): it ends here
                self._end(previous, ctx)
            if index == 0:
                register_agent_names(getattr(ctx, "agent", None))
            attributes: dict[str, Any] = {sc.AGENTDIAG_KIND: sc.KIND_ITERATION, sc.AGENTDIAG_ITERATION_INDEX: index}
            conversation = getattr(ctx, "conversation_id", None)
            if type(conversation) is str:  # the run's, as on the framework's spans: one session (a digest on export)
                attributes[sc.GEN_AI_CONVERSATION_ID] = conversation
            span = self.tracer.start_span(sc.ITERATION_SPAN_NAME, attributes=attributes)
            evicted: list[_Open] = []
            with self._lock:
                self._open[key] = _Open(span, _usage_of(ctx), node)
                while len(self._open) > self.max_open:
                    oldest = next(iter(self._open))
                    evicted.append(self._open.pop(oldest))
                    self._index.pop(oldest, None)
            for stale in evicted:
                self.evicted += 1
                stale.span.end()
            return span
        if isinstance(node, CallToolsNode):
            current = self._open.get(key)
            return None if current is None else current.span
        return None

    def before(self, ctx: Any, node: Any) -> None:
        """``before_node_run`` fired for ``node``. In ``run()`` and ``iter()`` it fires inside ``wrap_node_run``,
        where the step's iteration is current already. ``run_stream()`` fires it *before* streaming a node, and
        streams the node outside ``wrap_node_run`` (which then encloses graph advancement only): a
        ``ModelRequestNode``'s iteration is opened here and made current in the run's task until its step ends,
        so the streamed ``chat`` and the tools of its answer nest under it. Any other node than the step's two
        ends the step (the streamed final step is followed by ``SetFinalResult``, never by its ``CallToolsNode``)."""
        from pydantic_ai import CallToolsNode, ModelRequestNode

        if isinstance(node, ModelRequestNode):
            span = self.enter(ctx, node)
            if span is None or trace.get_current_span() is span:
                return
            token = otel_context.attach(_step_context(span, ctx))
            with self._lock:
                current = self._open.get(self._key(ctx))
                if current is not None and current.span is span:
                    current.token = token
                    return
            otel_context.detach(token)  # ended meanwhile (evicted): not current after all
        elif not isinstance(node, CallToolsNode):
            with self._lock:
                current = self._open.pop(self._key(ctx), None)
            if current is not None:
                self._end(current, ctx)

    def leave(self, ctx: Any, node: Any, result: Any) -> None:
        """After a node ran: a ``CallToolsNode`` ends its step's iteration; the run's last node forgets it."""
        from pydantic_ai import CallToolsNode
        from pydantic_graph import End

        key = self._key(ctx)
        if isinstance(node, CallToolsNode):
            with self._lock:
                current = self._open.pop(key, None)
            if current is not None:
                self._end(current, ctx)
        if isinstance(result, End):
            self.forget(ctx)

    def fail(self, ctx: Any, exc: BaseException) -> None:
        """A node raised: its step's iteration ends as failed, and the run's state goes (a node's error reaches
        this hook only when no capability recovered it: the run fails)."""
        key = self._key(ctx)
        with self._lock:
            current = self._open.pop(key, None)
            self._index.pop(key, None)
        if current is not None:
            span = current.span
            span.set_attribute(sc.ERROR_TYPE, error_type_of(exc))
            span.set_status(Status(StatusCode.ERROR))
            self._end(current, ctx)

    def forget(self, ctx: Any) -> None:
        """The run ended: its state goes (an iteration still open ends)."""
        key = self._key(ctx)
        with self._lock:
            current = self._open.pop(key, None)
            self._index.pop(key, None)
        if current is not None:
            self._end(current, ctx)

    def close(self) -> int:
        """End every open iteration (at ``uninstrument()``); how many were open."""
        with self._lock:
            still = list(self._open.values())
            self._open.clear()
            self._index.clear()
        for item in still:
            item.span.end()
        return len(still)

    @staticmethod
    def _end(item: _Open, ctx: Any) -> None:
        span = item.span
        grown = _usage_of(ctx)
        for key, before, after in zip(_USAGE, item.usage, grown, strict=True):
            if after > before:
                span.set_attribute(sc.AGENTDIAG_USAGE_PREFIX + key, after - before)
        span.end()
        # Made current by before(): no longer, when it still is in this context (elsewhere, or once the run's own
        # context moved on, the token is not this context's to reset).
        if item.token is not None and trace.get_current_span() is span:
            otel_context.detach(item.token)
        item.token = None


def _step_context(span: trace.Span, ctx: Any) -> otel_context.Context:
    """The context a step runs in: its iteration current, and the run's conversation id as the context's
    conversation (as :func:`otel_agentdiag.agent_run` carries it), so spans of other instrumentations inside the
    step (our OpenAI client's ``chat``) are numbered in the run's session: Pydantic AI sets
    ``gen_ai.conversation.id`` on its own spans only."""
    context = trace.set_span_in_context(span)
    conversation = getattr(ctx, "conversation_id", None)
    if type(conversation) is str:
        context = otel_context.set_value(CONVERSATION_ID_KEY, conversation, context)
    return context


def before_node_wrapper(iterations: Iterations) -> Any:
    """A wrapt wrapper for ``Instrumentation.before_node_run(ctx, *, node)``: the hook runs first (it may
    replace the node), then :meth:`Iterations.before` sees the node that will run. Returns what the hook
    returned, unchanged."""

    async def wrap(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        node = await wrapped(*args, **kwargs)
        ctx = args[0] if args else kwargs.get("ctx")
        _safely(iterations.before, ctx, node)
        return node

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return wrap(wrapped, instance, args, kwargs)

    return wrapper


def node_run_wrapper(iterations: Iterations) -> Any:
    """A wrapt wrapper for ``Instrumentation.wrap_node_run(ctx, *, node, handler)`` that runs the node inside
    its iteration span. What the node returns or raises is passed on unchanged."""

    async def wrap(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        ctx = args[0] if args else kwargs.get("ctx")
        node = kwargs.get("node", args[1] if len(args) > 1 else None)
        span: trace.Span | None = None
        with handle_internal_errors("opening a Pydantic AI iteration"):
            span = iterations.enter(ctx, node)
        if span is None:
            result = await wrapped(*args, **kwargs)
            _safely(iterations.leave, ctx, node, result)
            return result
        token = otel_context.attach(_step_context(span, ctx))
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            _safely(iterations.fail, ctx, exc)
            raise
        otel_context.detach(token)
        _safely(iterations.leave, ctx, node, result)
        return result

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return wrap(wrapped, instance, args, kwargs)

    return wrapper


def _safely(step: Any, *args: Any) -> None:
    with handle_internal_errors("closing a Pydantic AI iteration"):
        step(*args)


def agent_tool_names(agent: Any) -> list[str]:
    """The tool names an agent's function toolsets declare (``@agent.tool``, ``tools=[...]``,
    ``FunctionToolset``): the framework's own definitions, read from ``agent.toolsets``."""
    from pydantic_ai.toolsets import FunctionToolset

    names: list[str] = []

    def visit(toolset: Any) -> None:
        if isinstance(toolset, FunctionToolset):
            names.extend(name for name in toolset.tools if isinstance(name, str))

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return names


def register_agent_names(agent: Any) -> None:
    """Register the agent's name (``Agent(name=...)``) and its declared tool names: code, not data."""
    if agent is None:
        return
    with handle_internal_errors("registering a Pydantic AI agent's names"):
        tools: Iterable[str] = agent_tool_names(agent)
        default_registry.register_valid("tool", tools)
        name = getattr(agent, "name", None)
        if isinstance(name, str):
            default_registry.register_valid("agent", [name])

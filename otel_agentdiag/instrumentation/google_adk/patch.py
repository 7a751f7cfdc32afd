"""The iteration spans Google ADK has none of, and the names its agents declare.

An ADK ``LlmAgent`` runs a loop of steps (``BaseLlmFlow.run_async``): each step (``_run_one_step_async``, "one
step means one LLM call") makes one model request and runs the tool calls of its response. ADK's own spans
(schema v2: ``invoke_workflow`` → ``invoke_agent`` → ``generate_content`` and ``execute_tool``) have no span for
that step, so :func:`step_wrapper` opens one ``agent.iteration`` per step (kind ``iteration``,
``agentdiag.iteration.index`` from 0 per invocation and agent), current around each drive of the step's event
stream, so ADK's ``generate_content`` and ``execute_tool`` spans nest under it. The step is an async generator:
the span's context is attached and detached around each ``__anext__`` (never held across a ``yield``, which
would leak it into the consumer's context), as ADK makes its own model-call span current.

It carries the session id (``gen_ai.conversation.id``, as ADK's spans do: filed in the run's session, a digest
on export). :func:`run_wrapper` puts the session id of ``Runner.run_async`` in the context as the run's
conversation, so every span of the run (ADK's tool spans carry no session id) is numbered in that session.

A step that raises (a tool that raises and no ``on_tool_error_callback`` answers it) fails its iteration
(``error.type`` the exception's type only); a step closed early is ended as it is.

At an invocation's first step the names the agent tree declares (every agent's ``name`` from the root, the
``name`` of each ``BaseTool`` in ``tools`` and the ``__name__`` of each plain function ADK wraps as a
``FunctionTool``) are registered as code; toolsets (MCP and others) are not read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.context import CONVERSATION_ID_KEY
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._base import error_type_of

__all__ = ["MAX_INVOCATIONS", "Steps", "declared_names", "register_declared_names", "run_wrapper", "step_wrapper"]

MAX_INVOCATIONS = 4096
"""Invocations (per agent) whose step count is remembered; past it the oldest is forgotten (its next step, if
any, would count from 0 again)."""

_MAX_AGENTS = 256
"""Agents read from one tree at most (a tree is code: a bound against a cycle, not a limit of use)."""


class Steps:
    """Opens the iteration span of each step and numbers it within its invocation and agent. Thread-safe."""

    def __init__(self, tracer: trace.Tracer, max_invocations: int = MAX_INVOCATIONS) -> None:
        self.tracer = tracer
        self.max_invocations = max_invocations
        self._index: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, invocation_context: Any) -> trace.Span:
        """The iteration span of a step about to run, started in the current context (ADK's ``invoke_agent``)."""
        agent = getattr(invocation_context, "agent", None)
        invocation = getattr(invocation_context, "invocation_id", None)
        key = (invocation if type(invocation) is str else str(id(invocation_context)), str(getattr(agent, "name", "")))
        with self._lock:
            index = self._index.pop(key, -1) + 1
            self._index[key] = index
            while len(self._index) > self.max_invocations:
                self._index.popitem(last=False)
        if index == 0:
            register_declared_names(agent)
        attributes: dict[str, Any] = {sc.AGENTDIAG_KIND: sc.KIND_ITERATION, sc.AGENTDIAG_ITERATION_INDEX: index}
        session = getattr(getattr(invocation_context, "session", None), "id", None)
        if type(session) is str:
            attributes[sc.GEN_AI_CONVERSATION_ID] = session
        return self.tracer.start_span(sc.ITERATION_SPAN_NAME, attributes=attributes)


def step_wrapper(steps: Steps) -> Any:
    """A wrapt wrapper for ``BaseLlmFlow._run_one_step_async(invocation_context)``: the step's events, each
    produced inside its iteration span. What the step yields or raises is passed on unchanged."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stream = wrapped(*args, **kwargs)
        try:
            span = steps.start(args[0] if args else kwargs.get("invocation_context"))
        except Exception as exc:  # noqa: BLE001 - telemetry never raises into the agent
            log_internal_error("opening a Google ADK iteration", exc)
            return stream
        return _driven_in(stream, trace.set_span_in_context(span), span)

    return wrapper


def run_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A wrapt wrapper for ``Runner.run_async(*, user_id, session_id, ...)``: the run's events, each produced
    with the session id as the context's conversation (as :func:`otel_agentdiag.agent_run` carries it), so every
    span of the run is numbered in its session when it starts. ADK's spans carry ``gen_ai.conversation.id`` only
    once started (and its tool spans never), which would number them outside the session they are filed in."""
    stream = wrapped(*args, **kwargs)
    session = kwargs.get("session_id")
    if type(session) is not str or not session:
        return stream
    return _driven_in(stream, otel_context.set_value(CONVERSATION_ID_KEY, session), None)


async def _driven_in(
    stream: AsyncGenerator[Any, None], context: Context, span: trace.Span | None
) -> AsyncIterator[Any]:
    """``stream``'s items, each produced with ``context`` attached (attached and detached around each
    ``__anext__``: never held across a ``yield``, where the consumer runs); ``span``, if any, fails with what the
    stream raises and ends with it."""
    try:
        while True:
            token = otel_context.attach(context)
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                break
            except BaseException as exc:
                if span is not None:
                    _fail(span, exc)
                raise
            finally:
                otel_context.detach(token)
            yield item
    finally:
        try:
            await stream.aclose()  # closed early (the consumer stopped): the stream's own clean-up runs
        finally:
            if span is not None:
                span.end()


def _fail(span: trace.Span, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit):
        return
    with handle_internal_errors("failing a Google ADK iteration"):
        span.set_attribute(sc.ERROR_TYPE, error_type_of(exc))
        span.set_status(Status(StatusCode.ERROR))


def declared_names(agent: Any) -> tuple[list[str], list[str]]:
    """``(agents, tools)``: the names the agent's whole tree (from its root) declares in code."""
    from google.adk.tools.base_tool import BaseTool  # type: ignore[import-untyped,import-not-found,unused-ignore]

    root = getattr(agent, "root_agent", agent)
    agents: list[str] = []
    tools: list[str] = []
    pending, seen = [root], 0
    while pending and seen < _MAX_AGENTS:
        node = pending.pop()
        seen += 1
        name = getattr(node, "name", None)
        if isinstance(name, str):
            agents.append(name)
        for tool in getattr(node, "tools", None) or ():
            if isinstance(tool, BaseTool):
                tools.append(tool.name)
            elif callable(tool) and isinstance(getattr(tool, "__name__", None), str):
                tools.append(tool.__name__)  # a plain function: ADK's FunctionTool takes its name from it
        pending.extend(getattr(node, "sub_agents", None) or ())
    return agents, tools


def register_declared_names(agent: Any) -> None:
    """Register the names the agent tree declares (see :func:`declared_names`): code, not data."""
    if agent is None:
        return
    with handle_internal_errors("registering a Google ADK agent's names"):
        agents, tools = declared_names(agent)
        default_registry.register_valid("agent", agents)
        default_registry.register_valid("tool", tools)

"""AgentChat's steps as a span tree: runs, iterations, model calls and tool calls, from wrappers on its public methods.

AgentChat reports no step ids to an observer, so :class:`AgentChatSteps` keys each step by an object of its own and
finds a step's parent in a :class:`~contextvars.ContextVar` (:data:`CURRENT`) that the wrappers set while a run or a
tool call runs: every task AgentChat starts inside one (``asyncio.gather`` of two runs, the parallel tool calls of
one answer, a team's runtime) copies it, so concurrent steps cannot misparent. The spans themselves are built by
:class:`~otel_agentdiag.instrumentation._framework.SpanTree` (roll-ups, cost, error marking):

- **run**: ``BaseChatAgent.run`` / ``run_stream``, ``AssistantAgent.on_messages`` / ``on_messages_stream`` (a team
  calls these directly) and ``BaseGroupChat.run`` / ``run_stream``. A call made while the same agent (or team) is
  already running in this context (``run`` → ``on_messages`` → ``on_messages_stream``) is that run, not a second
  one. An agent's turn in a team is a run nested in the team's run.
- **iteration**: opened by each model call made directly in a run (``agentdiag.iteration.index`` 0, 1, ... per
  run); the tool calls the model asked for join it, and it ends when the last of them ends (at once when the
  model answered text), else at the run's next model call or its end.
- **LLM**: ``BaseOpenAIChatCompletionClient.create`` / ``create_stream`` (autogen-ext's OpenAI and Azure OpenAI
  clients): ``chat {model}``, usage from ``CreateResult.usage`` (a count of 0 for both is AutoGen's "not
  reported": absent), finish reason. The step owns the call: our OpenAI client instrumentation enriches its span.
- **tool**: ``BaseTool.run_json`` and ``BaseStreamTool.run_json_stream`` (what ``StaticWorkbench.call_tool``
  runs): ``execute_tool {tool}``; a tool that raises is marked failed with the exception's class, and what AutoGen
  does with the exception (an error result for the model) is unchanged.

Names: an agent's or team's ``name``, a tool object's ``name`` and the tool definitions a model call offers are
code, registered as declared. Nothing else is read from AutoGen's objects: no message, argument, result or id
(a tool call id goes beside its span, hashed). With content capture on, what a step saw goes to
:meth:`Node.capture`, the local store only.

Every wrapper passes on what the wrapped method returns, yields or raises, unchanged; a failure of ours is logged.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.context import LLM_CALL_KEY
from otel_agentdiag._internal.declared import register_tools, tool_names
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._base import CANCELLATIONS, error_type_of
from otel_agentdiag.instrumentation._framework import Node, SpanTree, run_span
from otel_agentdiag.instrumentation._values import as_count, put

__all__ = ["CURRENT", "AgentChatSteps", "SilentTracer", "coroutine_wrapper", "stream_wrapper"]

CURRENT: ContextVar[Node | None] = ContextVar("agentdiag_autogen_step", default=None)
"""The innermost AgentChat run or tool call in progress in this context."""

_FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "function_calls": "tool_calls",
    "content_filter": "content_filter",
}
"""AutoGen's ``FinishReasons`` → the GenAI conventions' (its ``unknown`` is left out)."""

Steps = tuple[Token[Node | None], object]


class SilentTracer(trace.NoOpTracer):
    """The tracer handed to autogen-core's own span helpers while ours trace the same steps: it starts nothing and,
    unlike ``NoOpTracer``, leaves the current span as it is (so a tool's own spans keep their parent)."""

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return _no_span()


@contextmanager
def _no_span() -> Iterator[trace.Span]:
    yield trace.INVALID_SPAN


def _live(node: Node | None) -> Node | None:
    while node is not None and node.ended:
        node = node.parent
    return node


def _name(obj: Any) -> str | None:
    try:
        name = getattr(obj, "name", None)
    except Exception:  # noqa: BLE001 - a property that raises: no name
        return None
    return name if type(name) is str and name else None


class AgentChatSteps:
    """The open AgentChat steps of this process and their spans (see the module doc). Never raises into AutoGen."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tree = SpanTree(tracer)
        self._models: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.enabled = True

    # -- context ----------------------------------------------------------------------------------------
    @staticmethod
    def enter(node: Node, *, llm: bool = False) -> Steps:
        """Make ``node`` the current step (and its span the current span) in this context."""
        # A span that could not start leaves the ambient context as it is (its empty context would hide it).
        ctx = node.context if node.span.get_span_context().is_valid else otel_context.get_current()
        if llm and node.llm is not None:
            ctx = otel_context.set_value(LLM_CALL_KEY, node.llm, ctx)  # one owner per model call
        return CURRENT.set(node), otel_context.attach(ctx)

    @staticmethod
    def leave(tokens: Steps) -> None:
        step, ctx = tokens
        with handle_internal_errors("restoring the context after an AutoGen step"):
            otel_context.detach(ctx)  # type: ignore[arg-type]
            CURRENT.reset(step)

    # -- runs -------------------------------------------------------------------------------------------
    def start_run(self, owner: Any) -> Node | None:
        """A run of ``owner`` (an agent or a team) starts here, or None: the same owner already runs in this
        context (this call is part of that run), or tracing is off."""
        if not self.enabled:
            return None
        try:
            current = _live(CURRENT.get())
            if current is not None and current.kind == sc.KIND_RUN and current.extra.get("owner") is owner:
                return None
            name = _name(owner)
            if name is not None:
                default_registry.register_valid("agent", (name,))
            node = self.tree.new_node(object(), None if current is None else current.key, kind=sc.KIND_RUN)
            node.extra["owner"] = owner
            node.extra["next"] = 0
            span_name, attributes = run_span(name)
            self.tree.open(node, span_name, attributes, activate=False)
            return node
        except Exception as exc:  # noqa: BLE001 - telemetry never raises into the agent
            log_internal_error("starting an AutoGen run span", exc)
            return None

    def end_run(self, node: Node, exc: BaseException | None, *, closed: bool = False) -> None:
        """The run ended: with its result, with ``exc``, or ``closed`` by its reader before its result (a stop,
        not a failure)."""
        with handle_internal_errors("ending an AutoGen run span"):
            self._end_iteration(node)
            error_type = None
            if closed:
                node.stop_reason = sc.STOP_CANCELLED
            elif exc is None:
                node.stop_reason = sc.STOP_COMPLETED
            elif type(exc).__name__ in CANCELLATIONS:
                node.stop_reason = sc.STOP_CANCELLED
            else:
                node.stop_reason = sc.STOP_ERROR
                error_type = error_type_of(exc)
            self.tree.end(node.key, error_type=error_type)

    # -- iterations -------------------------------------------------------------------------------------
    def _end_iteration(self, run: Node) -> None:
        iteration = run.extra.pop("iteration", None)
        if iteration is not None:
            self.tree.end(iteration.key)

    def _open_iteration(self, run: Node) -> Node | None:
        self._end_iteration(run)
        index = run.extra["next"]
        run.extra["next"] = index + 1
        node = self.tree.start_iteration(object(), run.key, index)
        if node is not None:
            node.extra["pending"] = None  # tool calls still to come: known once the model answered
            node.extra["run"] = run
            run.extra["iteration"] = node
        return node

    def _tool_done(self, iteration: Node | None) -> None:
        """One tool call of ``iteration`` ended: the iteration ends with its last one."""
        if iteration is None or iteration.ended:
            return
        with self._lock:
            pending = iteration.extra.get("pending")
            if type(pending) is not int:
                return
            pending -= 1
            iteration.extra["pending"] = pending
        if pending <= 0:
            self._close_iteration(iteration)

    def _close_iteration(self, iteration: Node) -> None:
        run = iteration.extra.get("run")
        if run is not None and run.extra.get("iteration") is iteration:
            run.extra.pop("iteration", None)
        self.tree.end(iteration.key)

    # -- model calls ------------------------------------------------------------------------------------
    def _model(self, client: Any, kwargs: Mapping[str, Any]) -> str | None:
        extra = kwargs.get("extra_create_args")
        if isinstance(extra, Mapping) and type(extra.get("model")) is str:
            return str(extra["model"])
        try:
            return self._models[client]
        except (KeyError, TypeError):
            pass
        model = None
        try:  # the client's public configuration (its component config) names the model
            value = client.dump_component().config.get("model")
            model = value if type(value) is str and value else None
        except Exception:  # noqa: BLE001 - a client whose configuration does not dump: no model name
            model = None
        try:
            self._models[client] = model
        except TypeError:
            pass
        return model

    def start_llm(self, client: Any, kwargs: Mapping[str, Any]) -> Node | None:
        """A model call starts: under a new iteration of the run it is made in, else under the current step."""
        if not self.enabled:
            return None
        try:
            current = _live(CURRENT.get())
            parent = current
            if current is not None and current.kind == sc.KIND_RUN:
                parent = self._open_iteration(current) or current
            register_tools(tool_names(list(kwargs.get("tools") or ())))  # the definitions offered: code
            model = self._model(client, kwargs)
            provider = "azure.ai.openai" if "Azure" in type(client).__name__ else "openai"
            attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_PROVIDER_NAME: provider}
            name = sc.OP_CHAT
            if model is not None:
                attributes[sc.GEN_AI_REQUEST_MODEL] = model
                name = f"{sc.OP_CHAT} {model}"
            return self.tree.start(
                object(),
                None if parent is None else parent.key,
                kind=sc.KIND_LLM,
                name=name,
                attributes=attributes,
                span_kind=SpanKind.CLIENT,
                activate=False,
            )
        except Exception as exc:  # noqa: BLE001
            log_internal_error("starting an AutoGen model call span", exc)
            return None

    def capture_llm_input(self, node: Node, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        messages = args[0] if args else kwargs.get("messages")
        if messages is not None:
            node.capture(sc.CONTENT_INPUT_MESSAGES, [_dump(m) for m in messages])

    def end_llm(self, node: Node, result: Any, exc: BaseException | None, stream_end: str | None = None) -> None:
        with handle_internal_errors("ending an AutoGen model call span"):
            attributes: dict[str, Any] = {}
            put(attributes, sc.AGENTDIAG_STREAM_END, stream_end)
            iteration = node.parent if node.parent is not None and node.parent.kind == sc.KIND_ITERATION else None
            calls = None
            if result is not None:
                usage = getattr(result, "usage", None)
                prompt = as_count(getattr(usage, "prompt_tokens", None))
                completion = as_count(getattr(usage, "completion_tokens", None))
                if prompt or completion:  # AutoGen's 0 and 0: the API reported nothing
                    put(attributes, sc.GEN_AI_USAGE_INPUT_TOKENS, prompt)
                    put(attributes, sc.GEN_AI_USAGE_OUTPUT_TOKENS, completion)
                reason = _FINISH_REASONS.get(getattr(result, "finish_reason", None))  # type: ignore[arg-type]
                if reason is not None:
                    attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)
                content = getattr(result, "content", None)
                calls = len(content) if isinstance(content, list) else 0
                if _content.enabled():
                    node.capture(
                        sc.CONTENT_OUTPUT_MESSAGES,
                        [_dump(c) for c in content] if isinstance(content, list) else content,
                    )
            error_type = None if exc is None else error_type_of(exc)
            self.tree.end(node.key, attributes=attributes, error_type=error_type)
            if iteration is not None:
                if calls:
                    with self._lock:
                        iteration.extra["pending"] = calls
                else:  # a text answer, or a failed call: no tool call will join this iteration
                    self._close_iteration(iteration)

    # -- tool calls -------------------------------------------------------------------------------------
    def start_tool(self, tool: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Node | None:
        """A tool call starts: in the current run's iteration (else under the current step)."""
        if not self.enabled:
            return None
        try:
            current = _live(CURRENT.get())
            parent = current
            if current is not None and current.kind == sc.KIND_RUN:
                iteration = current.extra.get("iteration")
                parent = iteration if iteration is not None and not iteration.ended else current
            name = _name(tool) or "tool"
            default_registry.register_valid("tool", (name,))  # the tool object's own name: code
            attributes: dict[str, Any] = {
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: name,
                sc.GEN_AI_TOOL_TYPE: "function",
            }
            call_id = kwargs.get("call_id", args[2] if len(args) > 2 else None)
            if type(call_id) is str and call_id:
                attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id  # beside the span, hashed (_internal/ids.py)
            node = self.tree.start(
                object(),
                None if parent is None else parent.key,
                kind=sc.KIND_TOOL,
                name=f"{sc.OP_EXECUTE_TOOL} {name}",
                attributes=attributes,
                activate=False,
            )
            if node is not None and _content.enabled():
                arguments = args[0] if args else kwargs.get("args")
                if isinstance(arguments, Mapping):
                    node.capture(sc.CONTENT_TOOL_ARGUMENTS, dict(arguments))
            return node
        except Exception as exc:  # noqa: BLE001
            log_internal_error("starting an AutoGen tool span", exc)
            return None

    def end_tool(self, node: Node, tool: Any, result: Any, exc: BaseException | None) -> None:
        with handle_internal_errors("ending an AutoGen tool span"):
            if _content.enabled():
                if exc is not None:
                    node.capture(sc.CONTENT_TOOL_RESULT, str(exc))
                elif result is not None:
                    node.capture(sc.CONTENT_TOOL_RESULT, tool.return_value_as_string(result))
            iteration = node.parent if node.parent is not None and node.parent.kind == sc.KIND_ITERATION else None
            self.tree.end(node.key, error_type=None if exc is None else error_type_of(exc))
            self._tool_done(iteration)

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> int:
        """Stop tracing and end every span still open with ``error.type = agentdiag.uninstrumented``."""
        self.enabled = False
        return self.tree.end_all(sc.ERROR_TYPE_UNINSTRUMENTED)


def _dump(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


# -- wrappers ---------------------------------------------------------------------------------------------------
Start = Callable[[Any, tuple[Any, ...], dict[str, Any]], "Node | None"]
End = Callable[[Node, Any, Any, "BaseException | None"], None]


def coroutine_wrapper(start: Start, end: End, steps: AgentChatSteps, *, llm: bool = False) -> Any:
    """A wrapt wrapper for an ``async def`` method: the step opens when the coroutine starts and ends with it;
    ``start(instance, args, kwargs)`` opens it (or returns None: not a step of its own), ``end(node, instance,
    result, exc)`` ends it. The method's result or exception is passed on unchanged."""

    async def wrap(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        node = start(instance, args, kwargs)
        if node is None:
            return await wrapped(*args, **kwargs)
        tokens = steps.enter(node, llm=llm)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            steps.leave(tokens)
            end(node, instance, None, exc)
            raise
        steps.leave(tokens)
        end(node, instance, result, None)
        return result

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return wrap(wrapped, instance, args, kwargs)

    return wrapper


def stream_wrapper(
    start: Start, end: End, steps: AgentChatSteps, is_last: Callable[[Any], bool], *, llm: bool = False
) -> Any:
    """A wrapt wrapper for a method returning an async generator. The step opens when the stream is first read;
    each read runs with the step current (and only the read: the reader's own code between items never sees it);
    the step ends with the item ``is_last`` recognises (the stream's result: a consumer may stop reading there),
    with the stream's end or error, or when the reader closes the stream early. Every item is passed on
    unchanged, in order; an exception from the stream propagates unchanged."""

    async def traced(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        inner = wrapped(*args, **kwargs)
        node = start(instance, args, kwargs)
        if node is None:
            try:
                async for item in inner:
                    yield item
            finally:
                await inner.aclose()
            return
        open_ = True
        try:
            while True:
                tokens = steps.enter(node, llm=llm)
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    steps.leave(tokens)
                if open_ and is_last(item):
                    open_ = False
                    end(node, instance, item, None)
                yield item
        except GeneratorExit:
            if open_:
                open_ = False
                end(node, instance, None, _CLOSED)
            raise
        except BaseException as exc:
            if open_:
                open_ = False
                end(node, instance, None, exc)
            raise
        finally:
            await inner.aclose()
        if open_:
            end(node, instance, None, None)

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return traced(wrapped, instance, args, kwargs)

    return wrapper


class _Closed(GeneratorExit):
    """The reader closed a stream before its end (not an error of the stream)."""


_CLOSED = _Closed()


def run_ends(steps: AgentChatSteps) -> End:
    def end(node: Node, instance: Any, result: Any, exc: BaseException | None) -> None:
        steps.end_run(node, None if exc is _CLOSED else exc, closed=exc is _CLOSED)

    return end


def llm_ends(steps: AgentChatSteps) -> End:
    def end(node: Node, instance: Any, result: Any, exc: BaseException | None) -> None:
        if exc is _CLOSED:
            steps.end_llm(node, None, None, stream_end=sc.STREAM_CLOSED)
        else:
            steps.end_llm(node, result, exc)

    return end


def tool_ends(steps: AgentChatSteps) -> End:
    def end(node: Node, instance: Any, result: Any, exc: BaseException | None) -> None:
        steps.end_tool(node, instance, result, None if exc is _CLOSED else exc)

    return end

"""Hand-written agent spans: ``agent_run``, ``iteration``, ``llm_call``, ``tool_call``, ``@agent``, ``@tool``.

Span names, kinds and attributes follow the OpenTelemetry GenAI semantic conventions (see design.md §3):

============  ==================================  ========  ==========================================
kind          span name                           SpanKind  attributes set at start
============  ==================================  ========  ==========================================
run           ``invoke_agent {agent name}``       INTERNAL  operation, agent name/id, conversation, user
iteration     ``agent.iteration``                 INTERNAL  iteration index, conversation
llm           ``{operation} {model}``             CLIENT    operation, provider, request model, conversation
tool          ``execute_tool {tool name}``        INTERNAL  operation, tool name, call id, tool type, conversation
============  ==================================  ========  ==========================================

Every span carries ``agentdiag.kind``. The conversation id given to :func:`agent_run` travels through the
OpenTelemetry context, so every span started inside the run carries ``gen_ai.conversation.id``.

Correlation ids (conversation, user, agent id, tool call id, response id) are never set on the span as raw
attributes, where every processor on the provider, a user's or a vendor's, would read them: they are kept
beside the span (``_internal/ids.py``) for otel-agentdiag's redactors, which export them as keyed digests.
A provider without one of our redactors exports none of them.

The wrappers never change what the wrapped code returns or raises. An exception is recorded on the span
(status ERROR without a description, ``error.type`` = the exception class, an ``exception`` event) and
re-raised unchanged; a failure of the telemetry itself is logged and swallowed.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import (
    ACTIVE_FRAMEWORK_STEP,
    CONVERSATION_ID_KEY,
    LLM_CALL_KEY,
    framework_parent,
)
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import NAME_PATTERN, default_registry
from otel_agentdiag.instrumentation._base import LLMCallState, error_type_of
from otel_agentdiag.instrumentation._provider import manual_tracer, tracer_provider_in_use, use_tracer_provider

__all__ = [
    "LLMCall",
    "agent",
    "agent_run",
    "iteration",
    "llm_call",
    "register_names",
    "tool",
    "tool_call",
    "use_tracer_provider",
]

_logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

_tracer_provider_in_use = tracer_provider_in_use
"""The provider :func:`use_tracer_provider` set, or ``None`` (its old private name, read by ``configure()``)."""


def register_names(
    *,
    tools: Iterable[str] = (),
    agents: Iterable[str] = (),
    models: Iterable[str] = (),
    guardrails: Iterable[str] = (),
) -> None:
    """Declare tool, agent, guardrail (and, for policies with a ``registered_name`` model rule, model) names as
    code, so the redaction policy lets them through. The framework integrations register the names their
    framework's definitions declare by themselves.

    A tool name that reaches :func:`tool_call` without being declared (typically one taken from the model's
    output) is exported as the placeholder ``_OTHER``. Raises ``ValueError`` for a name that is not an
    identifier-like token of at most 128 characters (the message says which by kind and position, never the
    name). A name of that shape that fails the public-safety check every exported string meets (it looks like
    a credential, an e-mail address, a URL or a path: ``sk-proj-...``, ``ghp_...``, a JWT) is refused: it is not
    registered, spans carry ``_OTHER`` in its place, and one warning names the kind and the reason, never the
    name; the other names are registered.
    """
    default_registry.register(tools=tools, agents=agents, models=models, guardrails=guardrails)


class _SpanScope:
    """A span that is current for the duration of a ``with`` block."""

    __slots__ = ("_rollup", "_span", "_token")

    _kind = SpanKind.INTERNAL
    _rolls_up = False
    """True for LLM spans: started inside a framework step, their usage counts in the step's roll-ups."""

    def __init__(self) -> None:
        self._span: trace.Span = trace.INVALID_SPAN
        self._token: object | None = None
        self._rollup: Any = None

    def _name_and_attributes(self) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _context_values(self, ctx: otel_context.Context) -> otel_context.Context:
        return ctx

    def __enter__(self) -> _SpanScope:
        # Inline try/except rather than handle_internal_errors(): this is the hot path of every wrapper.
        try:
            ctx = otel_context.get_current()
            if ACTIVE_FRAMEWORK_STEP.get() is not None:
                step = framework_parent(ctx)
                if step is not None:  # inside a framework's step: parented to it
                    ctx = step.context
                    if self._rolls_up:
                        self._rollup = step
            name, attributes = self._name_and_attributes()
            # Correlation ids go beside the span, to our redactors only; never onto it (_internal/ids.py). The
            # run's conversation id reaches every span started in its context through our on_start processors.
            if _ids.KEYS.isdisjoint(attributes):  # iterations, model calls: no id of their own at start
                span = manual_tracer().start_span(
                    name,
                    context=ctx,
                    kind=self._kind,
                    attributes=attributes,
                    record_exception=False,
                    set_status_on_exception=False,
                )
            else:
                span = _ids.start_span(manual_tracer(), name, context=ctx, kind=self._kind, attributes=attributes)
            self._span = span
            self._token = otel_context.attach(self._context_values(trace.set_span_in_context(span, ctx)))
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("starting a span", exc)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            span = self._span
            if exc is not None and span.is_recording():
                span.set_attribute(sc.ERROR_TYPE, error_type_of(exc))
                span.record_exception(exc, escaped=True)
                # No description: the exception text may hold exactly the data we must not export.
                span.set_status(Status(StatusCode.ERROR))
            if self._rollup is not None:
                self._rollup.add_span_usage(span)
            span.end()
        except Exception as internal:  # noqa: BLE001
            log_internal_error("ending a span", internal)
        finally:
            token = self._token
            if token is not None:
                self._token = None
                try:
                    otel_context.detach(token)  # type: ignore[arg-type]
                except Exception as internal:  # noqa: BLE001
                    log_internal_error("restoring the context", internal)
        # Returning None: the user's exception propagates unchanged.

    @property
    def span(self) -> trace.Span:
        """The underlying OpenTelemetry span (a non-recording span when tracing is off)."""
        return self._span

    def _capture(self, role: str, value: Any) -> None:
        if value is not None and _content.enabled():
            _content.capture(self._span, role, value)


class _AgentRun(_SpanScope):
    __slots__ = ("_agent_id", "_conversation_id", "_name", "_user_id")

    def __init__(self, name: str, conversation_id: Any, user_id: Any, agent_id: Any) -> None:
        super().__init__()
        self._name = name
        self._conversation_id = None if conversation_id is None else str(conversation_id)
        self._user_id = user_id
        self._agent_id = agent_id

    def _name_and_attributes(self) -> tuple[str, dict[str, Any]]:
        name = self._name
        # A frozenset lookup on the hot path; validation and the registry lock only for a new name.
        if not default_registry.is_agent(name) and isinstance(name, str) and NAME_PATTERN.fullmatch(name):
            default_registry.register(agents=(name,))
        attributes: dict[str, Any] = {
            sc.AGENTDIAG_KIND: sc.KIND_RUN,
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: name,
        }
        if self._conversation_id is not None:
            attributes[sc.GEN_AI_CONVERSATION_ID] = self._conversation_id
        if self._user_id is not None:
            attributes[sc.USER_ID] = str(self._user_id)
        if self._agent_id is not None:
            attributes[sc.GEN_AI_AGENT_ID] = str(self._agent_id)
        return f"{sc.OP_INVOKE_AGENT} {name}", attributes

    def _context_values(self, ctx: otel_context.Context) -> otel_context.Context:
        if self._conversation_id is not None:
            ctx = otel_context.set_value(CONVERSATION_ID_KEY, self._conversation_id, ctx)
        return ctx

    def __enter__(self) -> _AgentRun:
        super().__enter__()
        return self

    def record_content(self, *, input_messages: Any = None, output_messages: Any = None) -> None:
        """With content capture on (``configure(capture_content=True)``), keep what the run was asked and what
        it answered in the local store (never on the span, never exported). A no-op otherwise."""
        self._capture(sc.CONTENT_INPUT_MESSAGES, input_messages)
        self._capture(sc.CONTENT_OUTPUT_MESSAGES, output_messages)


class _Iteration(_SpanScope):
    __slots__ = ("_index",)

    def __init__(self, index: int) -> None:
        super().__init__()
        self._index = index

    def _name_and_attributes(self) -> tuple[str, dict[str, Any]]:
        return sc.ITERATION_SPAN_NAME, {
            sc.AGENTDIAG_KIND: sc.KIND_ITERATION,
            sc.AGENTDIAG_ITERATION_INDEX: self._index,
        }

    def __enter__(self) -> _Iteration:
        super().__enter__()
        return self


class LLMCall(_SpanScope):
    """The handle :func:`llm_call` yields; call :meth:`record_response` once the model has answered."""

    __slots__ = ("_model", "_operation", "_provider")

    _kind = SpanKind.CLIENT
    _rolls_up = True

    def __init__(self, provider: str, model: str | None, operation: str) -> None:
        super().__init__()
        self._provider = provider
        self._model = model
        self._operation = operation

    def _name_and_attributes(self) -> tuple[str, dict[str, Any]]:
        attributes: dict[str, Any] = {
            sc.AGENTDIAG_KIND: sc.KIND_LLM,
            sc.GEN_AI_OPERATION_NAME: self._operation,
            sc.GEN_AI_PROVIDER_NAME: self._provider,
        }
        name = str(self._operation)
        if self._model:
            attributes[sc.GEN_AI_REQUEST_MODEL] = self._model
            name = f"{name} {self._model}"
        return name, attributes

    def _context_values(self, ctx: otel_context.Context) -> otel_context.Context:
        # This span owns the model call: a client instrumentation (OpenAI, Anthropic) called inside enriches it
        # instead of starting a second LLM span.
        return otel_context.set_value(LLM_CALL_KEY, LLMCallState(self._span, owns=False), ctx)

    def __enter__(self) -> LLMCall:
        super().__enter__()
        return self

    def record_response(
        self,
        *,
        response_model: str | None = None,
        response_id: str | None = None,
        finish_reasons: Sequence[str] | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        """Record what the model reported. Anything not given stays absent (usage is never a made-up 0)."""
        with handle_internal_errors("recording an LLM response"):
            span = self._span
            if not span.is_recording():
                return
            attributes: dict[str, Any] = {}
            if response_model is not None:
                attributes[sc.GEN_AI_RESPONSE_MODEL] = response_model
            if response_id is not None:
                attributes[sc.GEN_AI_RESPONSE_ID] = str(response_id)
            if finish_reasons is not None:
                attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(str(r) for r in finish_reasons)
            if input_tokens is not None:
                attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
            if output_tokens is not None:
                attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
            _ids.set_attributes(span, attributes)  # the response id beside the span, not on it

    def record_content(
        self,
        *,
        input_messages: Any = None,
        output_messages: Any = None,
        system_instructions: Any = None,
        tool_definitions: Any = None,
    ) -> None:
        """With content capture on (``configure(capture_content=True)``), keep the call's content in the local
        store: never on the span, never exported. A no-op otherwise. Values are copied now (later changes to
        them are not seen); a client instrumentation called inside fills in what is not given here."""
        self._capture(sc.CONTENT_SYSTEM_INSTRUCTIONS, system_instructions)
        self._capture(sc.CONTENT_TOOL_DEFINITIONS, tool_definitions)
        self._capture(sc.CONTENT_INPUT_MESSAGES, input_messages)
        self._capture(sc.CONTENT_OUTPUT_MESSAGES, output_messages)


class _ToolCall(_SpanScope):
    """The handle :func:`tool_call` yields."""

    __slots__ = ("_arguments", "_call_id", "_name")

    def __init__(self, name: str, call_id: Any, arguments: Any = None) -> None:
        super().__init__()
        self._name = name
        self._call_id = call_id
        self._arguments = arguments

    def _name_and_attributes(self) -> tuple[str, dict[str, Any]]:
        attributes: dict[str, Any] = {
            sc.AGENTDIAG_KIND: sc.KIND_TOOL,
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: self._name,
            sc.GEN_AI_TOOL_TYPE: "function",
        }
        if self._call_id is not None:
            attributes[sc.GEN_AI_TOOL_CALL_ID] = str(self._call_id)
        return f"{sc.OP_EXECUTE_TOOL} {self._name}", attributes

    def __enter__(self) -> _ToolCall:
        super().__enter__()
        if self._arguments is not None:
            self._capture(sc.CONTENT_TOOL_ARGUMENTS, self._arguments)
        return self

    def record_arguments(self, arguments: Any) -> None:
        """With content capture on, keep what the tool received (local store only). A no-op otherwise."""
        self._capture(sc.CONTENT_TOOL_ARGUMENTS, arguments)

    def record_result(self, result: Any) -> None:
        """With content capture on, keep what the tool returned, or the exception it raised (local store only).
        A no-op otherwise."""
        self._capture(sc.CONTENT_TOOL_RESULT, result)


def agent_run(name: str, *, conversation_id: Any = None, user_id: Any = None, agent_id: Any = None) -> _AgentRun:
    """A span for one run of an agent: ``invoke_agent {name}``.

    ``conversation_id`` becomes ``gen_ai.conversation.id`` of this span and every span started inside it;
    ``user_id`` becomes ``user.id``, ``agent_id`` ``gen_ai.agent.id``. They are exported only as keyed
    HMAC-SHA256 digests, by otel-agentdiag's redactors; no raw id is ever set on a span (see the module doc).
    ``name`` is registered as an allowed agent name when it is an identifier-like token that passes the
    public-safety check (else it is exported as ``_OTHER``, and a name that fails the check is refused with a
    warning, once).
    """
    return _AgentRun(name, conversation_id, user_id, agent_id)


def iteration(index: int) -> _Iteration:
    """A span for one turn of the agent's loop: ``agent.iteration`` with ``agentdiag.iteration.index``."""
    return _Iteration(index)


def llm_call(*, provider: str, model: str | None, operation: str = sc.OP_CHAT) -> LLMCall:
    """A CLIENT span for one model call: ``{operation} {model}``. Use the yielded handle's
    :meth:`LLMCall.record_response` to add response model, id, finish reasons and token usage."""
    return LLMCall(provider, model, operation)


def tool_call(name: str, *, call_id: Any = None, arguments: Any = None) -> _ToolCall:
    """A span for one tool execution: ``execute_tool {name}``; ``call_id`` becomes ``gen_ai.tool.call.id``.

    ``arguments`` (and the handle's ``record_result()``) are kept only with content capture on, in the local
    store, never on the span.

    The name is *not* registered: a name only seen here at run time usually comes from the model's output
    and is exported as ``_OTHER`` unless declared by ``@tool``, ``register_names()`` or the policy.
    """
    return _ToolCall(name, call_id, arguments)


class _Arguments:
    """How a decorated function's call becomes captured arguments: ``{parameter: value}``, without ``self`` and
    ``cls``. The signature is read once, on the first call with content capture on."""

    __slots__ = ("_fn", "_signature")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._signature: inspect.Signature | None = None

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            if self._signature is None:
                self._signature = inspect.signature(self._fn)
            bound = self._signature.bind_partial(*args, **kwargs).arguments
            return {k: v for k, v in bound.items() if k not in ("self", "cls")}
        except (TypeError, ValueError):  # no signature, or a call the function itself will refuse
            return {"args": args, "kwargs": kwargs}


def _wrap(fn: F, scope: Callable[[], _SpanScope], decorator: str, roles: tuple[str, str]) -> F:
    """``roles``: the content roles of the function's arguments and of its result."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"@{decorator} does not support generator functions; open a span inside the generator")
    arguments = _Arguments(fn)
    takes, gives = roles
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope() as handle:
                if not _content.enabled():
                    return await fn(*args, **kwargs)
                handle._capture(takes, arguments(args, kwargs))
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as exc:
                    handle._capture(gives, exc)
                    raise
                handle._capture(gives, result)
                return result

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope() as handle:
            if not _content.enabled():
                return fn(*args, **kwargs)
            handle._capture(takes, arguments(args, kwargs))
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                handle._capture(gives, exc)
                raise
            handle._capture(gives, result)
            return result

    return wrapper  # type: ignore[return-value]


def _name_of(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


@overload
def tool(name: F) -> F: ...
@overload
def tool(name: str | None = None) -> Callable[[F], F]: ...
def tool(name: str | Callable[..., Any] | None = None) -> Any:
    """Decorate a sync or async function as a tool: each call runs in an ``execute_tool {name}`` span.

    The name (default: the function's ``__name__``) is registered as an allowed tool name at decoration time
    (as by :func:`register_names`: ``ValueError`` for a malformed name; one that fails the public-safety check
    is refused with a warning and exported as ``_OTHER``).
    Usable as ``@tool``, ``@tool()`` or ``@tool("get_weather")``. With content capture on, the call's
    arguments (``{parameter: value}``) and its result or exception are kept in the local store.
    """
    if callable(name):
        return tool(None)(name)

    def decorate(fn: F) -> F:
        tool_name = name or _name_of(fn)
        default_registry.register(tools=(tool_name,))
        return _wrap(
            fn, lambda: _ToolCall(tool_name, None), "tool", (sc.CONTENT_TOOL_ARGUMENTS, sc.CONTENT_TOOL_RESULT)
        )

    return decorate


@overload
def agent(name: F) -> F: ...
@overload
def agent(name: str | None = None) -> Callable[[F], F]: ...
def agent(name: str | Callable[..., Any] | None = None) -> Any:
    """Decorate a sync or async function as an agent: each call runs in an ``invoke_agent {name}`` span.

    The name (default: the function's ``__name__``) is registered as an allowed agent name (as by
    :func:`register_names`).
    """
    if callable(name):
        return agent(None)(name)

    def decorate(fn: F) -> F:
        agent_name = name or _name_of(fn)
        default_registry.register(agents=(agent_name,))
        return _wrap(
            fn,
            lambda: _AgentRun(agent_name, None, None, None),
            "agent",
            (sc.CONTENT_INPUT_MESSAGES, sc.CONTENT_OUTPUT_MESSAGES),
        )

    return decorate

"""The span scopes behind the manual context managers: start a span current for a ``with`` block, end it once.

One class per kind of span (run, iteration, LLM call, tool call): each names its span and its start attributes,
:class:`_SpanScope` does the rest: parents it (to a framework step when one is active), keeps correlation ids
beside the span (``_internal/ids.py``), makes it current, records an exception (status ERROR without a
description, ``error.type``, an ``exception`` event) and ends it. The user's exception propagates unchanged;
a failure of the telemetry itself is logged and swallowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import (
    ACTIVE_FRAMEWORK_STEP,
    AGENT_NAME_KEY,
    CONVERSATION_ID_KEY,
    LLM_CALL_KEY,
    ROLLUP_KEY,
    enclosing_agent,
    framework_parent,
)
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import NAME_PATTERN, default_registry
from otel_agentdiag._internal.spans import set_own_attributes
from otel_agentdiag.cost.pricing import leaf_cost
from otel_agentdiag.cost.rollup import Rollup
from otel_agentdiag.instrumentation._base import LLMCallState, error_type_of, record_exception
from otel_agentdiag.instrumentation._provider import manual_tracer
from otel_agentdiag.instrumentation._values import put

__all__ = ["LLMCall"]


class _SpanScope:
    """A span that is current for the duration of a ``with`` block."""

    __slots__ = ("_rollup", "_span", "_token")

    _kind = SpanKind.INTERNAL
    _is_run = False
    _rolls_up = False
    """True for LLM spans: their usage and cost count in the roll-ups of the framework step (or manual run or
    iteration) they are started in."""
    _sums = False
    """True for runs and iterations: they carry the roll-ups of the LLM leaves that end inside them."""

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
            if self._rolls_up and self._rollup is None:
                self._rollup = otel_context.get_value(ROLLUP_KEY, ctx)  # the manual run or iteration it is in
            name, attributes = self._name_and_attributes()
            # Correlation ids go beside the span, to our redactors only; never onto it (_internal/ids.py). The
            # run's conversation id reaches every span started in its context through our on_start processors.
            if _ids.KEYS.isdisjoint(attributes):  # iterations, model calls: no id of their own at start
                agent = enclosing_agent(attributes, ctx)  # as _ids.start_span names it
                if agent is not None:
                    attributes[sc.GEN_AI_AGENT_NAME] = agent
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
            child = self._context_values(trace.set_span_in_context(span, ctx))
            # Sampled out or switched off (the API's NonRecordingSpan, also what the SDK's sampler returns): no
            # roll-up is allocated. A class check, not is_recording(): this is every run's and iteration's path.
            if self._sums and span.__class__ is not trace.NonRecordingSpan:
                parent = otel_context.get_value(ROLLUP_KEY, ctx)
                self._rollup = Rollup(span, parent if isinstance(parent, Rollup) else None, is_run=self._is_run)
                child = otel_context.set_value(ROLLUP_KEY, self._rollup, child)
            self._token = otel_context.attach(child)
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
                record_exception(span, exc)
                # No description: the exception text may hold exactly the data we must not export.
                span.set_status(Status(StatusCode.ERROR))
            rollup = self._rollup
            if self._sums:
                if rollup is not None and span.is_recording():
                    roll = rollup.attributes()
                    if roll:
                        set_own_attributes(span, roll)
            elif (rollup is not None or self._rolls_up) and span.is_recording():
                if self._rolls_up:
                    leaf_cost(span)  # its agentdiag.cost.usd, when priced, before it rolls up and ends
                if rollup is not None:
                    rollup.add_span_usage(span)
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

    _sums = True
    _is_run = True

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
        if isinstance(self._name, str):
            ctx = otel_context.set_value(AGENT_NAME_KEY, self._name, ctx)
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

    _sums = True

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
            put(attributes, sc.GEN_AI_RESPONSE_MODEL, response_model)
            if response_id is not None:
                attributes[sc.GEN_AI_RESPONSE_ID] = str(response_id)
            if finish_reasons is not None:
                attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(str(r) for r in finish_reasons)
            put(attributes, sc.GEN_AI_USAGE_INPUT_TOKENS, input_tokens)
            put(attributes, sc.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens)
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

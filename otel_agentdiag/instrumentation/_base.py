"""What every client instrumentation shares: the life of one LLM span.

A patch translates library objects into attributes; :class:`LLMCallState` owns the span: it starts it with the
sampling-relevant attributes, makes it current while the SDK sends its HTTP requests (so each attempt is
recorded on it, see :mod:`._attempts`), records the response, records a failure, and ends the span exactly once.

**One owner per LLM call.** A span that already represents the model call (``agentdiag.llm_call()``, or a
framework integration of ours) puts its :class:`LLMCallState` in the OpenTelemetry context under
``LLM_CALL_KEY``. A client instrumentation called inside it does not start a second span: it *enriches* the
owner's span with what it learns (response model, usage, attempts) and leaves ending it to the owner. The
owner decides whether enrichment is welcome (``enrich=False``: the client instrumentation stays silent), and
whose content the client records (``content``: see :attr:`LLMCallState.content`).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import (
    LLM_CALL_KEY,
    ROLLUP_KEY,
    STREAMING_IN_USE,
    claim_streaming_step,
    framework_parent,
)
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag.cost.pricing import leaf_cost
from otel_agentdiag.instrumentation._values import put

__all__ = [
    "LLMCallState",
    "current_llm_call",
    "error_type_of",
    "llm_call_owned_by",
    "record_exception",
]

CANCELLATIONS = frozenset({"CancelledError", "KeyboardInterrupt", "GeneratorExit"})
"""Names of the exception classes that mean the caller stopped waiting, not that the call failed."""


def error_type_of(exc: BaseException) -> str:
    """``error.type`` for an exception: ``package.Name`` when the class is exported at its package's top level
    (``openai.RateLimitError``, not ``openai._exceptions.RateLimitError``), else ``module.QualName``."""
    cls = type(exc)
    module = cls.__module__ or ""
    if module == "builtins" or not module:
        return cls.__qualname__
    package = module.partition(".")[0]
    top = sys.modules.get(package)
    if top is not None and getattr(top, cls.__name__, None) is cls:
        return f"{package}.{cls.__name__}"
    return f"{module}.{cls.__qualname__}"


def record_exception(span: trace.Span, exc: BaseException) -> None:
    """The ``exception`` event the SDK's ``Span.record_exception`` adds (type, message, stack trace), without
    ``exception.escaped``, which the semantic conventions deprecated. Message and stack trace are for the
    user's own processors; every policy of ours drops both (the local one keeps a keyed digest of the message)."""
    module = type(exc).__module__
    qualname = type(exc).__qualname__
    span.add_event(
        sc.EXCEPTION_EVENT_NAME,
        {
            sc.EXCEPTION_TYPE: f"{module}.{qualname}" if module and module != "builtins" else qualname,
            sc.EXCEPTION_MESSAGE: str(exc),
            sc.EXCEPTION_STACKTRACE: "".join(traceback.format_exception(exc)),
        },
    )


def current_llm_call(ctx: otel_context.Context | None = None) -> LLMCallState | None:
    value = otel_context.get_value(LLM_CALL_KEY, ctx)
    return value if isinstance(value, LLMCallState) else None


class LLMCallState:
    """One model call: its span, whether this state owns (ends) it, and its HTTP attempts.

    Every method is safe to call from telemetry code: none raises (failures are logged by type only).
    """

    __slots__ = (
        "_ended",
        "_first_chunk_ns",
        "_lock",
        "_start_ns",
        "attempts",
        "content",
        "enrich",
        "owns",
        "rollup",
        "span",
    )

    defers = False
    """True for a call whose one LLM span is another library's own (the anthropic SDK's): a foreign span that
    starts inside it is that call's span, not a copy of one of ours."""

    def __init__(self, span: trace.Span, *, owns: bool, enrich: bool = True, content: bool = True) -> None:
        self.span = span
        self.owns = owns
        """True when this state started the span and must end it."""
        self.enrich = enrich
        """False when the owner wants no attributes from client instrumentations."""
        self.content = content
        """Whether a client instrumentation records the call's content (when capture is on) on this span. False
        when the owner captures the content itself: a framework step does, from the framework's own data, so the
        framework's privacy switch (the Agents SDK's ``trace_include_sensitive_data``) stays an off switch."""
        self.attempts = 0
        self.rollup: Any = None
        """The framework step (or manual run or iteration) this call's span was started under (its usage and cost
        roll up there), or None."""
        self._ended = False
        self._lock = threading.Lock()
        self._start_ns = time.monotonic_ns()
        self._first_chunk_ns: int | None = None

    # -- starting ---------------------------------------------------------------------------------------
    @classmethod
    def begin(cls, tracer: trace.Tracer, name: str, attributes: dict[str, Any]) -> LLMCallState | None:
        """Start the LLM span for a call, or enrich the call's existing owner.

        Returns ``None`` when the owner asked for silence, or when starting failed (logged).
        """
        try:
            ctx = otel_context.get_current()
            owner = current_llm_call(ctx)
            step = None
            if owner is None:
                # Inside a framework's model-call step: that step owns the call. Inside another framework
                # step: the span is its child, and its usage rolls up into the step's run.
                step = framework_parent(ctx)
                if step is None and STREAMING_IN_USE[0]:
                    step = claim_streaming_step(ctx)
                if step is not None:
                    ctx, owner = step.context, step.llm
            if owner is not None:
                if not owner.enrich:
                    return None
                # The owner's span already carries kind, operation and provider; add what it may lack.
                state = cls(owner.span, owns=False, content=owner.content)
                state.set_attributes({k: v for k, v in attributes.items() if k != sc.AGENTDIAG_KIND})
                return state
            # The run's conversation id is recorded beside the span by our on_start processors (_internal/ids.py).
            span = _ids.start_span(tracer, name, context=ctx, kind=SpanKind.CLIENT, attributes=attributes)
            state = cls(span, owns=True)
            # Its usage and cost roll up into the framework step it is in, else into the manual run or iteration.
            # Sampled out or switched off (the API's NonRecordingSpan): nothing to sum. A class check, as the
            # manual scopes do: this is every model call's start.
            if span.__class__ is not trace.NonRecordingSpan:
                state.rollup = step if step is not None else otel_context.get_value(ROLLUP_KEY, ctx)
            return state
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("starting an LLM span", exc)
            return None

    @contextmanager
    def activated(self) -> Iterator[None]:
        """Make this call current while the SDK sends its request(s): the span becomes the parent of HTTP
        spans, and attempts are recorded on it."""
        try:
            ctx = otel_context.get_current()
            if self.span.get_span_context().is_valid:
                ctx = trace.set_span_in_context(self.span, ctx)
            ctx = otel_context.set_value(LLM_CALL_KEY, self, ctx)
            token: object | None = otel_context.attach(ctx)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("activating an LLM span", exc)
            token = None
        try:
            yield
        finally:
            if token is not None:
                try:
                    otel_context.detach(token)  # type: ignore[arg-type]
                except Exception as exc:  # noqa: BLE001
                    log_internal_error("restoring the context", exc)

    # -- recording --------------------------------------------------------------------------------------
    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        try:
            # Correlation ids (the response id) beside the span, for our redactors; never onto it.
            _ids.set_attributes(self.span, attributes)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("recording LLM attributes", exc)

    def record_attempt(self, status_code: int | None, error: BaseException | None) -> None:
        """One HTTP attempt ended: with a response (``status_code``) or an exception."""
        if not self.enrich:
            return
        try:
            with self._lock:
                resend_count = self.attempts
                self.attempts += 1
            span = self.span
            if not span.is_recording():
                return
            attributes: dict[str, Any] = {sc.HTTP_REQUEST_RESEND_COUNT: resend_count}
            if status_code is not None:
                attributes[sc.HTTP_RESPONSE_STATUS_CODE] = status_code
                if status_code >= 400:
                    attributes[sc.ERROR_TYPE] = str(status_code)
            elif error is not None:
                attributes[sc.ERROR_TYPE] = error_type_of(error)
            span.add_event(sc.AGENTDIAG_HTTP_ATTEMPT_EVENT, attributes)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("recording an HTTP attempt", exc)

    def first_chunk(self) -> None:
        """A streamed chunk arrived; the first one sets ``gen_ai.response.time_to_first_chunk``."""
        if self._first_chunk_ns is None:
            self._first_chunk_ns = now = time.monotonic_ns()
            self.set_attributes({sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: (now - self._start_ns) / 1e9})

    # -- content ----------------------------------------------------------------------------------------
    def capturing(self) -> bool:
        """Whether to record this call's content: capture is on (``configure(capture_content=True)``) and this
        state's owner leaves it to the client instrumentation. Cheap; build no content value when false."""
        return self.content and _content.enabled()

    def capture(self, role: str, value: Any) -> None:
        """Record ``value`` as the call's ``role`` content (a ``semconv.CONTENT_*`` name), beside its span, never
        on it. The value is snapshotted now, so later changes to it are not seen. Never raises."""
        _content.capture(self.span, role, value)

    # -- ending -----------------------------------------------------------------------------------------
    def _claim_end(self) -> bool:
        with self._lock:
            if self._ended:
                return False
            self._ended = True
            return True

    @property
    def ended(self) -> bool:
        return self._ended

    def _end_span(self) -> None:
        if self.span.is_recording():
            leaf_cost(self.span)  # its agentdiag.cost.usd, when priced, before it rolls up and ends
            if self.rollup is not None:
                self.rollup.add_span_usage(self.span)  # before end(): the span's attributes are still readable
        self.span.end()

    def finish(self, attributes: Mapping[str, Any] | None = None, *, stream_end: str | None = None) -> None:
        """The call succeeded (or a stream ended without error): record ``attributes``, end the span once."""
        if not self._claim_end():
            return
        try:
            out = dict(attributes or {})
            put(out, sc.AGENTDIAG_STREAM_END, stream_end)
            self.set_attributes(out)
            if self.owns:
                self._end_span()
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending an LLM span", exc)

    def fail(
        self,
        exc: BaseException,
        attributes: Mapping[str, Any] | None = None,
        *,
        streaming: bool = False,
    ) -> None:
        """The call (or reading its stream) raised ``exc``: status ERROR without a description, ``error.type``,
        an ``exception`` event with the type only; the exception itself is the caller's to re-raise, unchanged."""
        if not self._claim_end():
            return
        try:
            out = dict(attributes or {})
            if streaming:
                cancelled = type(exc).__name__ in CANCELLATIONS
                out[sc.AGENTDIAG_STREAM_END] = sc.STREAM_CANCELLED if cancelled else sc.STREAM_ERROR
            if self.owns:
                out[sc.ERROR_TYPE] = error_type_of(exc)
            self.set_attributes(out)
            if self.owns and self.span.is_recording():
                # The event carries the type only: an SDK error's message often quotes the request (a prompt, a
                # tool argument) and its traceback names local paths. Produce neither, whatever the pipeline.
                self.span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type_of(exc)})
                # No description: the exception text may carry the prompt, the answer or a credential.
                self.span.set_status(Status(StatusCode.ERROR))
            if self.owns:
                self._end_span()
        except Exception as internal:  # noqa: BLE001
            log_internal_error("ending an LLM span", internal)

    def abandon(self, attributes: Mapping[str, Any] | None = None) -> None:
        """A stream was garbage-collected unread and unclosed: the outcome is unknown, never a success."""
        if not self._claim_end():
            return
        try:
            out = dict(attributes or {})
            out[sc.AGENTDIAG_STREAM_END] = sc.STREAM_ABANDONED
            if self.owns:
                out[sc.ERROR_TYPE] = sc.ERROR_TYPE_STREAM_ABANDONED
            self.set_attributes(out)
            if self.owns:
                if self.span.is_recording():
                    self.span.set_status(Status(StatusCode.ERROR))
                self._end_span()
        except Exception as exc:  # noqa: BLE001
            log_internal_error("ending an abandoned stream's span", exc)


@contextmanager
def llm_call_owned_by(span: trace.Span, *, enrich: bool = True, content: bool = True) -> Iterator[LLMCallState]:
    """Declare that ``span`` represents the model call made inside the block.

    Client instrumentations (OpenAI, Anthropic) called inside do not start a second LLM span; with
    ``enrich=True`` they add response model, usage and HTTP attempts to ``span``, with ``enrich=False`` they
    add nothing. With ``content=True`` (and content capture on) they also record the call's content for
    ``span``; ``content=False`` leaves that to the caller. The caller keeps ending ``span``. This is how
    ``agentdiag.llm_call()`` and framework integrations keep one span per model call.
    """
    state = LLMCallState(span, owns=False, enrich=enrich, content=content)
    token = otel_context.attach(otel_context.set_value(LLM_CALL_KEY, state))
    try:
        yield state
    finally:
        otel_context.detach(token)

"""Wrapper factories shared by the client instrumentations.

A patch module describes a method in three functions: ``describe(instance, kwargs) -> (span name,
attributes)`` for the span's start, ``respond(result) -> attributes`` for a complete answer, and an
accumulator factory for a streamed one. Content capture adds two more: ``inputs(kwargs) -> [(role, value)]``
(the request's content, captured before it is sent, so a failed call keeps it) and ``outputs(result) ->
value | None`` (a complete answer's content; a streamed one is rebuilt by its accumulator, made with
``content=True``). They run only when :meth:`LLMCallState.capturing` says so. The factories here close over the
tracer once, at instrument time, and do the rest: suppression, one owner per call, attempts, errors, streams,
content. The user's call always runs exactly once, with its own arguments, and its result or exception comes
back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.declared import register_tools, tool_names
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag.instrumentation._base import LLMCallState
from otel_agentdiag.instrumentation._stream import (
    AsyncStreamManagerProxy,
    AsyncStreamProxy,
    StreamAccumulator,
    SyncStreamManagerProxy,
    SyncStreamProxy,
)

Describe = Callable[[Any, dict[str, Any]], "tuple[str, dict[str, Any]]"]
Respond = Callable[[Any], "dict[str, Any]"]
Accumulate = Callable[..., StreamAccumulator]
"""Makes a stream's accumulator: called with no argument, or with ``content=True`` to rebuild the answer too."""
Inputs = Callable[[dict[str, Any]], "list[tuple[str, Any]]"]
"""The request's content from the call's keyword arguments: ``(semconv.CONTENT_* role, value)`` pairs."""
Outputs = Callable[[Any], Any]
"""A complete answer's content (``semconv.CONTENT_OUTPUT_MESSAGES``), or ``None``."""
Wrapper = Callable[[Any, Any, Any, Any], Any]


def begin_call(tracer: trace.Tracer, describe: Describe, instance: Any, kwargs: dict[str, Any]) -> LLMCallState | None:
    """Start (or enrich) the LLM span of a call; ``None``: run the call untraced."""
    if not is_instrumentation_enabled():
        return None
    try:
        name, attributes = describe(instance, kwargs)
    except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
        log_internal_error("describing an LLM call", exc)
        return None
    call = LLMCallState.begin(tracer, name, attributes)
    if call is not None and ("tools" in kwargs or "functions" in kwargs):
        _declare_offered_tools(call, kwargs)
    return call


def _declare_offered_tools(call: LLMCallState, kwargs: dict[str, Any]) -> None:
    """Register the names of the tools the request offers the model (``tools``, or OpenAI's legacy
    ``functions``): the agent's code wrote them, so the tool spans that use them keep them (a name the model
    invents stays ``_OTHER``). Only for a recorded call: tracing off or sampled out does nothing here."""
    tools = kwargs.get("tools")
    if tools is None:
        tools = kwargs.get("functions")
    if tools is None:
        return
    with handle_internal_errors("reading the tools a request offers"):
        if call.span.is_recording():
            register_tools(tool_names(tools))


def _capturing(call: LLMCallState, inputs: Inputs | None, kwargs: dict[str, Any]) -> bool:
    """Whether the call's content is captured (:meth:`LLMCallState.capturing`); if so, its request's content is
    captured now, before it is sent (so a failed call keeps it)."""
    if not call.capturing():
        return False
    try:
        pairs = inputs(kwargs) if inputs is not None else ()
    except Exception as exc:  # noqa: BLE001
        log_internal_error("reading an LLM request's content", exc)
        return True
    for role, value in pairs:
        call.capture(role, value)
    return True


def _capture_outputs(call: LLMCallState, outputs: Outputs | None, result: Any) -> None:
    if outputs is None:
        return
    try:
        value = outputs(result)
    except Exception as exc:  # noqa: BLE001
        log_internal_error("reading an LLM response's content", exc)
        return
    if value is not None:
        call.capture(sc.CONTENT_OUTPUT_MESSAGES, value)


def _finish(call: LLMCallState, respond: Respond, result: Any, outputs: Outputs | None, capturing: bool) -> None:
    if capturing:
        _capture_outputs(call, outputs, result)  # before the span ends
    try:
        attributes = respond(result)
    except Exception as exc:  # noqa: BLE001
        log_internal_error("reading an LLM response", exc)
        attributes = {}
    call.finish(attributes)


def _accumulator(accumulate: Accumulate, capturing: bool = False) -> StreamAccumulator | None:
    try:
        return accumulate(content=True) if capturing else accumulate()
    except Exception as exc:  # noqa: BLE001
        log_internal_error("preparing a stream", exc)
        return None


def _answered(
    call: LLMCallState,
    result: Any,
    capturing: bool,
    stream: tuple[tuple[type, ...], type[SyncStreamProxy | AsyncStreamProxy], Accumulate],
    respond: Respond,
    outputs: Outputs | None,
) -> Any:
    """What a call that returned ``result`` hands back: ``result``, or a proxy over a stream (``stream``: the
    SDK's stream types, the proxy class, the accumulator factory) that ends the span when the stream ends."""
    stream_types, proxy, accumulate = stream
    if stream_types and isinstance(result, stream_types):
        accumulator = _accumulator(accumulate, capturing)
        if accumulator is not None:
            return proxy(result, call, accumulator)
        call.finish()
        return result
    _finish(call, respond, result, outputs, capturing)
    return result


def llm_call(
    tracer: trace.Tracer,
    describe: Describe,
    respond: Respond,
    accumulate: Accumulate,
    stream_types: tuple[type, ...],
    *,
    is_async: bool,
    inputs: Inputs | None = None,
    outputs: Outputs | None = None,
) -> Wrapper:
    """A ``wrapt`` wrapper for an SDK method (a coroutine function when ``is_async``) that returns an answer or a
    stream of ``stream_types``."""
    stream = (stream_types, AsyncStreamProxy if is_async else SyncStreamProxy, accumulate)

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = begin_call(tracer, describe, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        capturing = _capturing(call, inputs, kwargs)
        try:
            with call.activated():
                result = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        return _answered(call, result, capturing, stream, respond, outputs)

    async def async_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = begin_call(tracer, describe, instance, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        capturing = _capturing(call, inputs, kwargs)
        try:
            with call.activated():
                result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        return _answered(call, result, capturing, stream, respond, outputs)

    return async_wrapper if is_async else wrapper


def stream_manager(
    tracer: trace.Tracer,
    describe: Describe,
    accumulate: Accumulate,
    *,
    is_async: bool,
    defer: Callable[[Any], LLMCallState | None] | None = None,
    inputs: Inputs | None = None,
) -> Wrapper:
    """A wrapper for a stream helper (``messages.stream()``) that returns a context manager which sends the
    request when entered: the span starts on entry. ``defer(instance)`` may return a call state that another
    span owns (the SDK's own), in which case no span is started."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        manager = wrapped(*args, **kwargs)

        def start() -> tuple[LLMCallState | None, StreamAccumulator]:
            deferred = defer(instance) if defer is not None else None
            if deferred is not None:
                return deferred, NoStream()
            call = begin_call(tracer, describe, instance, kwargs)
            if call is None:
                return None, NoStream()
            capturing = _capturing(call, inputs, kwargs)
            accumulator = _accumulator(accumulate, capturing)
            return call, NoStream() if accumulator is None else accumulator

        try:
            return (AsyncStreamManagerProxy if is_async else SyncStreamManagerProxy)(manager, start)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("wrapping a stream helper", exc)
            return manager

    return wrapper


class NoStream:
    """The accumulator of a call that never streams, or of a stream whose span another owner records."""

    content = False

    def __init__(self, *, content: bool = False) -> None:
        pass  # nothing to rebuild, whatever the capture decision

    def on_chunk(self, chunk: Any) -> None:
        pass

    def attributes(self, stream: Any) -> dict[str, Any]:
        return {}

    def completed(self, stream: Any) -> bool:
        return False

    def output(self, stream: Any) -> Any:
        return None

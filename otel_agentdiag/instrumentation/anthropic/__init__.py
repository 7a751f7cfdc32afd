"""Auto-instrumentation of the ``anthropic`` Python SDK.

Covers ``messages.create`` (streamed with ``stream=True`` or not) and the ``messages.stream()`` helper, sync and
async.

Usage::

    from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument()       # or instrument(tracer_provider=...)

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_anthropic``).

Spans, streams, attempts and errors are as for :mod:`otel_agentdiag.instrumentation.openai`, with
``gen_ai.provider.name=anthropic``. With ``configure(capture_content=True)`` the request's ``messages``,
``system`` and ``tools`` and the answer (``[{"role": "assistant", "content": <blocks>, "stop_reason"}]``, rebuilt
from the events when streamed) are captured beside the span for the local store, never as attributes.

**The SDK's own spans.** anthropic 2.x emits its own OpenTelemetry span per API call
(``anthropic.messages.create``), on by default. One model call gets one LLM span, so:

* when the client's own tracing is off (``Anthropic(open_telemetry=False)``, ``ANTHROPIC_OPEN_TELEMETRY=false``
  — the default under ``opentelemetry-instrument`` with our distro — or an SDK without it), this instrumentor
  makes the span;
* when it is on, the SDK's span is the LLM span: this instrumentor makes none, and marks the SDK's span
  ``agentdiag.kind=llm`` and records each HTTP attempt on it (the redacting processor renames it
  ``chat {model}`` from its attributes and drops what the policy does not know). Content is not captured
  on the SDK's span: the SDK has its own content setting (``open_telemetry={"traces": {"content_mode": ...}}``).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag.instrumentation._base import LLMCallState, current_llm_call
from otel_agentdiag.instrumentation._instrumentor import ClientInstrumentor, Target
from otel_agentdiag.instrumentation._wrappers import Wrapper, llm_call, stream_manager
from otel_agentdiag.instrumentation.anthropic.package import _instruments

__all__ = ["AnthropicInstrumentor"]


def _defer(instance: Any) -> LLMCallState | None:
    """A call state for the SDK's own span when the client traces the call itself (see the module docs)."""
    from otel_agentdiag.instrumentation.anthropic.patch import SDKSpanCall, sdk_traces_call

    with handle_internal_errors("reading the anthropic client's tracing option"):
        if is_instrumentation_enabled() and current_llm_call() is None and sdk_traces_call(instance):
            return SDKSpanCall()
    return None


def _deferring(wrapper: Wrapper, *, is_async: bool) -> Wrapper:
    if is_async:

        async def async_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            deferred = _defer(instance)
            if deferred is None:
                return await wrapper(wrapped, instance, args, kwargs)
            with deferred.activated():
                return await wrapped(*args, **kwargs)

        return async_wrapper

    def sync_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        deferred = _defer(instance)
        if deferred is None:
            return wrapper(wrapped, instance, args, kwargs)
        with deferred.activated():
            return wrapped(*args, **kwargs)

    return sync_wrapper


class AnthropicInstrumentor(ClientInstrumentor):
    """An ``opentelemetry-instrumentation`` instrumentor for the ``anthropic`` SDK (idempotent, reversible)."""

    _library = "anthropic"

    _instruments = _instruments

    def _targets(self, tracer: trace.Tracer) -> list[Target]:
        import anthropic
        from anthropic.resources.messages import AsyncMessages, Messages

        from otel_agentdiag.instrumentation.anthropic import patch

        # The stream helper's request is sent when its manager is entered; the deferral check happens there too.
        helpers = hasattr(Messages, "stream")
        targets: list[Target] = []
        for resource, stream, is_async in (
            (Messages, anthropic.Stream, False),
            (AsyncMessages, anthropic.AsyncStream, True),
        ):
            create = llm_call(
                tracer,
                patch.create_request,
                patch.message_response,
                patch.MessagesAccumulator,
                (stream,),
                is_async=is_async,
                inputs=patch.messages_inputs,
                outputs=patch.message_outputs,
            )
            targets.append((resource, "create", _deferring(create, is_async=is_async)))
            if helpers:
                helper = stream_manager(
                    tracer,
                    patch.stream_request,
                    patch.MessageStreamAccumulator,
                    is_async=is_async,
                    defer=_defer,
                    inputs=patch.messages_inputs,
                )
                targets.append((resource, "stream", helper))
        return targets

"""Anthropic objects → GenAI attributes: the Messages API, streamed and not.

Token usage follows the semantic conventions' Anthropic refinement: ``gen_ai.usage.input_tokens`` is the
whole prompt (input + cache read + cache creation, when the API reported input tokens), with the cache parts
also under ``gen_ai.usage.cache_read.input_tokens`` / ``gen_ai.usage.cache_creation.input_tokens``. Nothing
here reads message content, the system prompt or tool definitions.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation._base import LLMCallState
from otel_agentdiag.instrumentation._values import as_float, as_int, as_str, get, put, server_attributes

PROVIDER = "anthropic"


def messages_request(instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    model = as_str(kwargs.get("model"))
    attributes: dict[str, Any] = {
        sc.AGENTDIAG_KIND: sc.KIND_LLM,
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.GEN_AI_PROVIDER_NAME: PROVIDER,
    }
    put(attributes, sc.GEN_AI_REQUEST_MODEL, model)
    put(attributes, sc.GEN_AI_REQUEST_MAX_TOKENS, as_int(kwargs.get("max_tokens")))
    put(attributes, sc.GEN_AI_REQUEST_TEMPERATURE, as_float(kwargs.get("temperature")))
    put(attributes, sc.GEN_AI_REQUEST_TOP_P, as_float(kwargs.get("top_p")))
    put(attributes, sc.GEN_AI_REQUEST_TOP_K, as_float(kwargs.get("top_k")))
    attributes.update(server_attributes(instance))
    return (f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT), attributes


def stream_request(instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``messages.stream()``: always streamed."""
    name, attributes = messages_request(instance, kwargs)
    attributes[sc.GEN_AI_REQUEST_STREAM] = True
    return name, attributes


def create_request(instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name, attributes = messages_request(instance, kwargs)
    if kwargs.get("stream") is True:
        attributes[sc.GEN_AI_REQUEST_STREAM] = True
    return name, attributes


def _usage(usage: Any, out: dict[str, Any]) -> None:
    if usage is None:
        return
    input_tokens = as_int(get(usage, "input_tokens"))
    cache_read = as_int(get(usage, "cache_read_input_tokens"))
    cache_creation = as_int(get(usage, "cache_creation_input_tokens"))
    if input_tokens is not None:
        out[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens + (cache_read or 0) + (cache_creation or 0)
    put(out, sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache_read)
    put(out, sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, cache_creation)
    put(out, sc.GEN_AI_USAGE_OUTPUT_TOKENS, as_int(get(usage, "output_tokens")))


def message_response(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if get(message, "type") != "message":
        return out  # a raw response (with_raw_response) or something else
    put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(message, "model")))
    put(out, sc.GEN_AI_RESPONSE_ID, as_str(get(message, "id")))
    reason = as_str(get(message, "stop_reason"))
    if reason:
        out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)
    _usage(get(message, "usage"), out)
    return out


class MessagesAccumulator:
    """Reads ``message_start`` / ``message_delta`` / ``message_stop`` events; for the ``messages.stream()``
    helper, whose ``get_final_message()`` reads the stream itself, falls back on its message snapshot."""

    __slots__ = ("message", "stop_reason", "stopped", "usage")

    def __init__(self) -> None:
        self.message: Any = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.stopped = False

    def on_chunk(self, event: Any) -> None:
        kind = get(event, "type")
        if kind == "message_start":
            self.message = get(event, "message")
            usage = get(self.message, "usage")
            for field in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                value = as_int(get(usage, field))
                if value is not None:
                    self.usage[field] = value
        elif kind == "message_delta":
            self.stop_reason = as_str(get(get(event, "delta"), "stop_reason")) or self.stop_reason
            usage = get(event, "usage")
            for field in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                value = as_int(get(usage, field))
                if value is not None:  # cumulative counts: the last one wins
                    self.usage[field] = value
        elif kind == "message_stop":
            self.stopped = True

    @staticmethod
    def _snapshot(stream: Any) -> Any:
        try:
            return getattr(stream, "current_message_snapshot", None)
        except Exception:  # noqa: BLE001 - the helper raises before its first event
            return None

    def attributes(self, stream: Any) -> dict[str, Any]:
        if self.message is None:
            snapshot = self._snapshot(stream)
            return message_response(snapshot) if snapshot is not None else {}
        out: dict[str, Any] = {}
        put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(self.message, "model")))
        put(out, sc.GEN_AI_RESPONSE_ID, as_str(get(self.message, "id")))
        if self.stop_reason:
            out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (self.stop_reason,)
        if self.usage:
            _usage(self.usage, out)
        return out

    def completed(self, stream: Any) -> bool:
        if self.stopped:
            return True
        snapshot = self._snapshot(stream) if self.message is None else None
        return snapshot is not None and get(snapshot, "stop_reason") is not None


def sdk_traces_call(instance: Any) -> bool:
    """Whether the anthropic SDK (2.x and later) emits its own span for calls of this resource's client.

    Read from the client's public ``open_telemetry`` option (reached through the resource's ``_client``).
    """
    options = getattr(getattr(instance, "_client", None), "open_telemetry", None)
    traces = options.get("traces") if isinstance(options, dict) else None
    return isinstance(traces, dict) and traces.get("enabled") is True


class SDKSpanCall(LLMCallState):
    """A call the anthropic SDK traces itself: its span is the one LLM span. While the SDK sends the request
    its span is current; each HTTP attempt marks it ``agentdiag.kind=llm`` and records the attempt on it."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(trace.INVALID_SPAN, owns=False)

    def record_attempt(self, status_code: int | None, error: BaseException | None) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            self.span = span
            self.set_attributes({sc.AGENTDIAG_KIND: sc.KIND_LLM})
        super().record_attempt(status_code, error)

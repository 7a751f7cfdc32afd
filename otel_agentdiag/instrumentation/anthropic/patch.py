"""Anthropic objects → GenAI attributes: the Messages API, streamed and not.

Token usage follows the semantic conventions' Anthropic refinement: ``gen_ai.usage.input_tokens`` is the
whole prompt (input + cache read + cache creation, when the API reported input tokens), with the cache parts
also under ``gen_ai.usage.cache_read.input_tokens`` / ``gen_ai.usage.cache_creation.input_tokens``. The
attribute readers never read message content, the system prompt or tool definitions.

The content readers (:func:`messages_inputs`, :func:`message_outputs`, the accumulators made with
``content=True``) run only when content capture is on, and hand back the caller's own objects (``messages``,
``system``, ``tools``) and the answer's content blocks; they read no other argument.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import trace

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation._base import LLMCallState
from otel_agentdiag.instrumentation._stream import TextBuffer, appended
from otel_agentdiag.instrumentation._values import (
    as_float,
    as_int,
    as_str,
    get,
    given_arguments,
    put,
    raw_answer,
    server_attributes,
)

PROVIDER = "anthropic"
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


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


def messages_inputs(kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The request's content: ``system``, ``tools`` and ``messages``."""
    return given_arguments(
        kwargs,
        (
            (sc.CONTENT_SYSTEM_INSTRUCTIONS, "system"),
            (sc.CONTENT_TOOL_DEFINITIONS, "tools"),
            (sc.CONTENT_INPUT_MESSAGES, "messages"),
        ),
    )


def _answer(message: Any, content: Any, stop_reason: Any) -> list[dict[str, Any]]:
    return [{"role": as_str(get(message, "role")) or "assistant", "content": content, "stop_reason": stop_reason}]


def message_outputs(message: Any) -> Any:
    """The answer's content: ``[{"role": "assistant", "content": <its content blocks>, "stop_reason"}]``."""
    message = raw_answer(message)  # with_raw_response: the body the SDK read
    if get(message, "type") != "message":
        return None  # a stream's raw response (unread) or something else
    return _answer(message, get(message, "content"), get(message, "stop_reason"))


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
    message = raw_answer(message)  # with_raw_response: the body the SDK read
    if get(message, "type") != "message":
        return out  # a stream's raw response (unread) or something else
    put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(message, "model")))
    put(out, sc.GEN_AI_RESPONSE_ID, as_str(get(message, "id")))
    reason = as_str(get(message, "stop_reason"))
    if reason:
        out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)
    _usage(get(message, "usage"), out)
    return out


def _block_dict(block: Any) -> dict[str, Any]:
    """A started content block as a dict the deltas can complete (the SDK model's own fields)."""
    if isinstance(block, dict):
        return dict(block)
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="python")
        if isinstance(dumped, dict):
            return dumped
    return {} if block is None else {"type": get(block, "type")}


class _StreamedBlock:
    """One content block of a streamed message: its ``content_block_start`` value and the deltas since."""

    __slots__ = ("citations", "partial_json", "signature", "start", "text", "thinking")

    def __init__(self, start: Any) -> None:
        self.start = start
        self.text: TextBuffer | None = None
        self.partial_json: TextBuffer | None = None
        self.thinking: TextBuffer | None = None
        self.signature: str | None = None
        self.citations: list[Any] | None = None

    def add(self, delta: Any) -> None:
        kind = get(delta, "type")
        if kind == "text_delta":
            self.text = appended(self.text, get(delta, "text"))
        elif kind == "input_json_delta":
            self.partial_json = appended(self.partial_json, get(delta, "partial_json"))
        elif kind == "thinking_delta":
            self.thinking = appended(self.thinking, get(delta, "thinking"))
        elif kind == "signature_delta":
            signature = get(delta, "signature")
            if isinstance(signature, str):
                self.signature = signature  # the whole signature, as the SDK's own accumulator takes it
        elif kind == "citations_delta":
            if self.citations is None:
                self.citations = []
            self.citations.append(get(delta, "citation"))

    def value(self) -> Any:
        if self.text is None and self.partial_json is None and self.thinking is None:
            if self.signature is None and self.citations is None:
                return self.start  # no deltas: the block as it started
        block = _block_dict(self.start)
        if self.text is not None:
            block["text"] = (as_str(block.get("text")) or "") + self.text.text()
        if self.thinking is not None:
            block["thinking"] = (as_str(block.get("thinking")) or "") + self.thinking.text()
        if self.signature is not None:
            block["signature"] = self.signature
        if self.citations is not None:
            block["citations"] = list(block.get("citations") or ()) + self.citations
        raw = None if self.partial_json is None else self.partial_json.text()
        if raw:
            # The tool input as the non-streamed answer carries it; a stream cut short keeps its raw JSON text.
            try:
                block["input"] = json.loads(raw)
            except ValueError:
                block["input"] = raw
        return block


class MessagesAccumulator:
    """Reads ``message_start`` / ``message_delta`` / ``message_stop`` events; for the ``messages.stream()``
    helper, whose ``get_final_message()`` reads the stream itself, falls back on its message snapshot.

    With ``content=True`` it also rebuilds the answer's content blocks from ``content_block_start`` /
    ``content_block_delta`` events, in the shape of :func:`message_outputs`; the helper's own snapshot, when
    there is one, is the answer instead (it has seen every event, read through the proxy or not)."""

    __slots__ = ("blocks", "content", "message", "stop_reason", "stopped", "usage")

    rebuild = True
    """Whether the content blocks are rebuilt from the events (the helper's snapshot makes that unnecessary)."""

    def __init__(self, *, content: bool = False) -> None:
        self.message: Any = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.stopped = False
        self.content = content
        self.blocks: dict[int, _StreamedBlock] | None = {} if content and self.rebuild else None  # none when off

    def on_chunk(self, event: Any) -> None:
        kind = get(event, "type")
        blocks = self.blocks
        if blocks is not None and kind in ("content_block_start", "content_block_delta"):
            index = as_int(get(event, "index"))
            if index is None:
                return
            if kind == "content_block_start":
                blocks[index] = _StreamedBlock(get(event, "content_block"))
                return
            block = blocks.get(index)
            if block is None:
                blocks[index] = block = _StreamedBlock(None)
            block.add(get(event, "delta"))
            return
        if kind == "message_start":
            self.message = get(event, "message")
            usage = get(self.message, "usage")
            for field in _USAGE_FIELDS:
                put(self.usage, field, as_int(get(usage, field)))
        elif kind == "message_delta":
            self.stop_reason = as_str(get(get(event, "delta"), "stop_reason")) or self.stop_reason
            usage = get(event, "usage")
            for field in _USAGE_FIELDS:  # cumulative counts: the last one wins
                put(self.usage, field, as_int(get(usage, field)))
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

    def output(self, stream: Any) -> Any:
        snapshot = self._snapshot(stream)
        if snapshot is not None:
            return _answer(snapshot, get(snapshot, "content"), get(snapshot, "stop_reason"))
        blocks = self.blocks or {}
        if self.message is None and not blocks:
            return None
        return _answer(self.message, [blocks[i].value() for i in sorted(blocks)], self.stop_reason)


class MessageStreamAccumulator(MessagesAccumulator):
    """The accumulator of the ``messages.stream()`` helper: its answer is the helper's own message snapshot."""

    __slots__ = ()

    rebuild = False


def sdk_traces_call(instance: Any) -> bool:
    """Whether the anthropic SDK (2.x and later) emits its own span for calls of this resource's client.

    Read from the client's public ``open_telemetry`` option (reached through the resource's ``_client``).
    """
    options = getattr(getattr(instance, "_client", None), "open_telemetry", None)
    traces = options.get("traces") if isinstance(options, dict) else None
    return isinstance(traces, dict) and traces.get("enabled") is True


class SDKSpanCall(LLMCallState):
    """A call the anthropic SDK traces itself: its span is the one LLM span. While the SDK sends the request
    its span is current; each HTTP attempt is recorded on it. The span stays the SDK's (a GenAI-convention
    ``chat`` span): the convention adapter maps it on the batch worker like any peer's model call (kind ``llm``,
    its cache-write and stop-reason keys, its cost), so it is never taken for a copy of a call of ours. Its
    content is the SDK's to record (its own ``content_mode``), not ours."""

    __slots__ = ()

    defers = True

    def __init__(self) -> None:
        super().__init__(trace.INVALID_SPAN, owns=False, content=False)

    def record_attempt(self, status_code: int | None, error: BaseException | None) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            self.span = span
        super().record_attempt(status_code, error)

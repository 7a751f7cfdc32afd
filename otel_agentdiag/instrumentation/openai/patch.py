"""OpenAI objects → GenAI attributes: chat completions, the Responses API, embeddings.

Nothing here reads message content, instructions, tool definitions or outputs: content capture is off
(a later, local-only feature). Request parameters are read from the call's keyword arguments by type; a value
of the wrong type (``openai.omit``, a string where a number belongs) is absent.
"""

from __future__ import annotations

from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation._values import as_float, as_int, as_str, get, put, server_attributes
from otel_agentdiag.instrumentation._wrappers import NoStream

PROVIDER = "openai"


def _start(operation: str, kwargs: dict[str, Any], instance: Any) -> tuple[str, dict[str, Any]]:
    model = as_str(kwargs.get("model"))
    attributes: dict[str, Any] = {
        sc.AGENTDIAG_KIND: sc.KIND_LLM,
        sc.GEN_AI_OPERATION_NAME: operation,
        sc.GEN_AI_PROVIDER_NAME: PROVIDER,
    }
    put(attributes, sc.GEN_AI_REQUEST_MODEL, model)
    if kwargs.get("stream") is True:
        attributes[sc.GEN_AI_REQUEST_STREAM] = True
    attributes.update(server_attributes(instance))
    return (f"{operation} {model}" if model else operation), attributes


def _output_type(response_format: Any) -> str | None:
    if isinstance(response_format, type):  # a pydantic model given to parse()
        return "json"
    kind = get(response_format, "type") if isinstance(response_format, dict) else None
    if kind in ("json_schema", "json_object"):
        return "json"
    if kind == "text":
        return "text"
    return None


# --- chat completions ------------------------------------------------------------------------------------
def chat_request(instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name, attributes = _start(sc.OP_CHAT, kwargs, instance)
    max_tokens = as_int(kwargs.get("max_completion_tokens"))
    put(
        attributes,
        sc.GEN_AI_REQUEST_MAX_TOKENS,
        max_tokens if max_tokens is not None else as_int(kwargs.get("max_tokens")),
    )
    put(attributes, sc.GEN_AI_REQUEST_TEMPERATURE, as_float(kwargs.get("temperature")))
    put(attributes, sc.GEN_AI_REQUEST_TOP_P, as_float(kwargs.get("top_p")))
    put(attributes, sc.GEN_AI_REQUEST_FREQUENCY_PENALTY, as_float(kwargs.get("frequency_penalty")))
    put(attributes, sc.GEN_AI_REQUEST_PRESENCE_PENALTY, as_float(kwargs.get("presence_penalty")))
    put(attributes, sc.GEN_AI_REQUEST_SEED, as_int(kwargs.get("seed")))
    choices = as_int(kwargs.get("n"))
    if choices is not None and choices != 1:
        attributes[sc.GEN_AI_REQUEST_CHOICE_COUNT] = choices
    put(attributes, sc.GEN_AI_OUTPUT_TYPE, _output_type(kwargs.get("response_format")))
    put(attributes, "openai.request.service_tier", as_str(kwargs.get("service_tier")))
    return name, attributes


def _chat_usage(usage: Any, out: dict[str, Any]) -> None:
    if usage is None:
        return
    put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, as_int(get(usage, "prompt_tokens")))
    put(out, sc.GEN_AI_USAGE_OUTPUT_TOKENS, as_int(get(usage, "completion_tokens")))
    put(out, sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, as_int(get(get(usage, "prompt_tokens_details"), "cached_tokens")))
    put(
        out,
        sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        as_int(get(get(usage, "completion_tokens_details"), "reasoning_tokens")),
    )


def _response_basics(response: Any, out: dict[str, Any]) -> None:
    put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(response, "model")))
    put(out, sc.GEN_AI_RESPONSE_ID, as_str(get(response, "id")))
    put(out, "openai.response.service_tier", as_str(get(response, "service_tier")))
    put(out, "openai.response.system_fingerprint", as_str(get(response, "system_fingerprint")))


def chat_response(response: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if get(response, "object") != "chat.completion":
        return out  # a raw response (with_raw_response) or something else: nothing to read without consuming it
    _response_basics(response, out)
    reasons = [r for r in (as_str(get(c, "finish_reason")) for c in get(response, "choices") or ()) if r]
    if reasons:
        out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons)
    _chat_usage(get(response, "usage"), out)
    return out


class ChatAccumulator:
    """Collects id, model, finish reasons and (final-chunk) usage from ``chat.completion.chunk`` objects."""

    __slots__ = ("first", "reasons", "usage")

    def __init__(self) -> None:
        self.first: Any = None
        self.reasons: dict[int, str] = {}
        self.usage: Any = None

    def on_chunk(self, chunk: Any) -> None:
        if self.first is None:
            self.first = chunk
        for choice in get(chunk, "choices") or ():
            reason = as_str(get(choice, "finish_reason"))
            if reason:
                self.reasons[as_int(get(choice, "index")) or 0] = reason
        usage = get(chunk, "usage")
        if usage is not None:
            self.usage = usage

    def attributes(self, stream: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.first is not None:
            _response_basics(self.first, out)
        if self.reasons:
            out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(self.reasons[i] for i in sorted(self.reasons))
        _chat_usage(self.usage, out)
        return out

    def completed(self, stream: Any) -> bool:
        return bool(self.reasons)


# --- Responses API ---------------------------------------------------------------------------------------
def responses_request(instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name, attributes = _start(sc.OP_CHAT, kwargs, instance)
    put(attributes, sc.GEN_AI_REQUEST_MAX_TOKENS, as_int(kwargs.get("max_output_tokens")))
    put(attributes, sc.GEN_AI_REQUEST_TEMPERATURE, as_float(kwargs.get("temperature")))
    put(attributes, sc.GEN_AI_REQUEST_TOP_P, as_float(kwargs.get("top_p")))
    if isinstance(kwargs.get("text_format"), type):
        attributes[sc.GEN_AI_OUTPUT_TYPE] = "json"
    else:
        put(attributes, sc.GEN_AI_OUTPUT_TYPE, _output_type(get(kwargs.get("text"), "format")))
    put(attributes, "openai.request.service_tier", as_str(kwargs.get("service_tier")))
    return name, attributes


def _responses_finish_reason(response: Any) -> str | None:
    status = as_str(get(response, "status"))
    if status == "completed":
        calls = any(get(item, "type") == "function_call" for item in get(response, "output") or ())
        return "tool_calls" if calls else "stop"
    if status == "incomplete":
        return as_str(get(get(response, "incomplete_details"), "reason")) or "incomplete"
    if status == "failed":
        return "error"
    return None


def responses_response(response: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if get(response, "object") != "response":
        return out
    _response_basics(response, out)
    reason = _responses_finish_reason(response)
    if reason is not None:
        out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)
    usage = get(response, "usage")
    if usage is not None:
        put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, as_int(get(usage, "input_tokens")))
        put(out, sc.GEN_AI_USAGE_OUTPUT_TOKENS, as_int(get(usage, "output_tokens")))
        put(
            out,
            sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            as_int(get(get(usage, "input_tokens_details"), "cached_tokens")),
        )
        put(
            out,
            sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
            as_int(get(get(usage, "output_tokens_details"), "reasoning_tokens")),
        )
    return out


_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponsesAccumulator:
    """Reads the Responses API's stream events: the first response snapshot, then the terminal one."""

    __slots__ = ("final", "snapshot")

    def __init__(self) -> None:
        self.snapshot: Any = None
        self.final: Any = None

    def on_chunk(self, event: Any) -> None:
        response = get(event, "response")
        if response is None:
            return
        if get(event, "type") in _TERMINAL_EVENTS:
            self.final = response
        elif self.snapshot is None:
            self.snapshot = response

    def attributes(self, stream: Any) -> dict[str, Any]:
        if self.final is not None:
            return responses_response(self.final)
        out: dict[str, Any] = {}
        if self.snapshot is not None:
            put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(self.snapshot, "model")))
            put(out, sc.GEN_AI_RESPONSE_ID, as_str(get(self.snapshot, "id")))
        return out

    def completed(self, stream: Any) -> bool:
        return self.final is not None


# --- embeddings ------------------------------------------------------------------------------------------
def embeddings_request(instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name, attributes = _start(sc.OP_EMBEDDINGS, kwargs, instance)
    encoding = as_str(kwargs.get("encoding_format"))
    if encoding is not None:
        attributes[sc.GEN_AI_REQUEST_ENCODING_FORMATS] = (encoding,)
    put(attributes, sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, as_int(kwargs.get("dimensions")))
    return name, attributes


def embeddings_response(response: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if get(response, "object") != "list":
        return out
    put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(response, "model")))
    put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, as_int(get(get(response, "usage"), "prompt_tokens")))
    return out


no_stream = NoStream
"""Embeddings never stream; every method still has an accumulator factory."""

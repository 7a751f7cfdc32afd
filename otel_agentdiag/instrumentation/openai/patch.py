"""OpenAI objects → GenAI attributes and captured content: chat completions, the Responses API, embeddings.

The attribute readers (``*_request``, ``*_response``, the accumulators' ``attributes``) never read message
content, instructions, tool definitions or outputs. Request parameters are read from the call's keyword
arguments by type; a value of the wrong type (``openai.omit``, a string where a number belongs) is absent.

The content readers (``*_inputs``, ``*_outputs``, the accumulators made with ``content=True``) run only when
content capture is on; they hand back the caller's own objects (message lists, SDK models), which the
recorder snapshots, and read no other argument (no headers, ``extra_*``, keys or URLs).
"""

from __future__ import annotations

from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation._stream import TextBuffer, appended
from otel_agentdiag.instrumentation._values import (
    as_float,
    as_int,
    as_str,
    get,
    given,
    given_arguments,
    put,
    raw_answer,
    server_attributes,
)
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


def chat_inputs(kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The request's content: ``messages``, and ``tools`` (or the legacy ``functions``)."""
    out: list[tuple[str, Any]] = []
    messages = kwargs.get("messages")
    if given(messages):
        out.append((sc.CONTENT_INPUT_MESSAGES, messages))
    tools = kwargs.get("tools")
    if not given(tools):
        tools = kwargs.get("functions")
    if given(tools):
        out.append((sc.CONTENT_TOOL_DEFINITIONS, tools))
    return out


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
    response = raw_answer(response)  # with_raw_response: the body the SDK read
    if get(response, "object") != "chat.completion":
        return out  # a stream's raw response (unread) or something else: nothing to read without consuming it
    _response_basics(response, out)
    reasons = [r for r in (as_str(get(c, "finish_reason")) for c in get(response, "choices") or ()) if r]
    if reasons:
        out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons)
    _chat_usage(get(response, "usage"), out)
    return out


def chat_outputs(response: Any) -> Any:
    """The answer's content: its choices, as ``[{"index", "finish_reason", "message"}]``."""
    response = raw_answer(response)  # with_raw_response: the body the SDK read
    if get(response, "object") != "chat.completion":
        return None  # a stream's raw response (unread): nothing to read without consuming it
    return [
        {"index": get(c, "index"), "finish_reason": get(c, "finish_reason"), "message": get(c, "message")}
        for c in get(response, "choices") or ()
    ]


def _joined(current: str | None, piece: Any) -> str | None:
    """A short streamed string (an id, a name) with ``piece`` appended, as the SDK's own accumulator joins it."""
    if not isinstance(piece, str):
        return current
    return piece if current is None else current + piece


class _StreamedCall:
    """One tool call (or legacy function call) of a streamed choice, rebuilt from its deltas."""

    __slots__ = ("arguments", "id", "name", "type")

    def __init__(self) -> None:
        self.id: str | None = None
        self.type: str | None = None
        self.name: str | None = None
        self.arguments: TextBuffer | None = None

    def add(self, delta: Any, function: Any) -> None:
        self.id = _joined(self.id, get(delta, "id"))
        kind = as_str(get(delta, "type"))
        if kind:
            self.type = kind
        self.name = _joined(self.name, get(function, "name"))
        self.arguments = appended(self.arguments, get(function, "arguments"))

    def function(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": None if self.arguments is None else self.arguments.text()}

    def tool_call(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "function": self.function()}


class _StreamedChoice:
    """One choice of a streamed chat completion, rebuilt from its deltas."""

    __slots__ = ("content", "finish_reason", "function_call", "refusal", "role", "tool_calls")

    def __init__(self) -> None:
        self.role: str | None = None
        self.content: TextBuffer | None = None
        self.refusal: TextBuffer | None = None
        self.tool_calls: dict[int, _StreamedCall] = {}
        self.function_call: _StreamedCall | None = None
        self.finish_reason: str | None = None

    def add(self, choice: Any) -> None:
        delta = get(choice, "delta")
        if delta is not None:
            role = as_str(get(delta, "role"))
            if role:
                self.role = role
            self.content = appended(self.content, get(delta, "content"))
            self.refusal = appended(self.refusal, get(delta, "refusal"))
            for call in get(delta, "tool_calls") or ():
                index = as_int(get(call, "index"))
                if index is None:
                    index = len(self.tool_calls)
                streamed = self.tool_calls.get(index)
                if streamed is None:
                    self.tool_calls[index] = streamed = _StreamedCall()
                streamed.add(call, get(call, "function"))
            function_call = get(delta, "function_call")
            if function_call is not None:
                if self.function_call is None:
                    self.function_call = _StreamedCall()
                self.function_call.add(None, function_call)
        reason = as_str(get(choice, "finish_reason"))
        if reason:
            self.finish_reason = reason

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": self.role,
            "content": None if self.content is None else self.content.text(),
            "refusal": None if self.refusal is None else self.refusal.text(),
        }
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i].tool_call() for i in sorted(self.tool_calls)]
        if self.function_call is not None:
            message["function_call"] = self.function_call.function()
        return message


class ChatAccumulator:
    """Collects id, model, finish reasons and (final-chunk) usage from ``chat.completion.chunk`` objects; with
    ``content=True`` also each choice's message (role, text, refusal, tool calls), in the shape of
    :func:`chat_outputs`. Only the streamed strings are kept, never the chunks."""

    __slots__ = ("choices", "content", "first", "reasons", "usage")

    def __init__(self, *, content: bool = False) -> None:
        self.first: Any = None
        self.reasons: dict[int, str] = {}
        self.usage: Any = None
        self.content = content
        self.choices: dict[int, _StreamedChoice] | None = {} if content else None  # nothing kept when off

    def on_chunk(self, chunk: Any) -> None:
        if self.first is None:
            self.first = chunk
        for choice in get(chunk, "choices") or ():
            reason = as_str(get(choice, "finish_reason"))
            if reason:
                self.reasons[as_int(get(choice, "index")) or 0] = reason
            choices = self.choices
            if choices is not None:
                index = as_int(get(choice, "index")) or 0
                streamed = choices.get(index)
                if streamed is None:
                    choices[index] = streamed = _StreamedChoice()
                streamed.add(choice)
        usage = get(chunk, "usage")
        if usage is not None:
            self.usage = usage

    def output(self, stream: Any) -> Any:
        if not self.choices:
            return None
        return [
            {"index": i, "finish_reason": choice.finish_reason, "message": choice.message()}
            for i, choice in sorted(self.choices.items())
        ]

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


def responses_inputs(kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The request's content: ``instructions``, ``tools`` and ``input`` (a string or a list of items)."""
    return given_arguments(
        kwargs,
        (
            (sc.CONTENT_SYSTEM_INSTRUCTIONS, "instructions"),
            (sc.CONTENT_TOOL_DEFINITIONS, "tools"),
            (sc.CONTENT_INPUT_MESSAGES, "input"),
        ),
    )


def responses_outputs(response: Any) -> Any:
    """The answer's content: the response's ``output`` items."""
    response = raw_answer(response)  # with_raw_response: the body the SDK read
    if get(response, "object") != "response":
        return None
    return get(response, "output")


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
    response = raw_answer(response)  # with_raw_response: the body the SDK read
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
    """Reads the Responses API's stream events: the first response snapshot, then the terminal one. With
    ``content=True`` the answer is the terminal response's ``output``; a stream that ended before it yields the
    output items completed so far (``response.output_item.done``)."""

    __slots__ = ("content", "final", "items", "snapshot")

    def __init__(self, *, content: bool = False) -> None:
        self.snapshot: Any = None
        self.final: Any = None
        self.content = content
        self.items: dict[int, Any] | None = {} if content else None  # nothing kept when off

    def on_chunk(self, event: Any) -> None:
        response = get(event, "response")
        if response is None:
            items = self.items
            if items is not None and get(event, "type") == "response.output_item.done":
                index = as_int(get(event, "output_index"))
                items[len(items) if index is None else index] = get(event, "item")
            return
        if get(event, "type") in _TERMINAL_EVENTS:
            self.final = response
        elif self.snapshot is None:
            self.snapshot = response

    def output(self, stream: Any) -> Any:
        if self.final is not None:
            return get(self.final, "output")
        items = self.items
        if items:
            return [items[i] for i in sorted(items)]
        return None

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


def embeddings_inputs(kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The request's content: ``input`` (the vectors that come back are not content worth keeping)."""
    value = kwargs.get("input")
    return [(sc.CONTENT_INPUT_MESSAGES, value)] if given(value) else []


def embeddings_response(response: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    response = raw_answer(response)  # with_raw_response: the body the SDK read
    if get(response, "object") != "list":
        return out
    put(out, sc.GEN_AI_RESPONSE_MODEL, as_str(get(response, "model")))
    put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, as_int(get(get(response, "usage"), "prompt_tokens")))
    return out


no_stream = NoStream
"""Embeddings never stream; every method still has an accumulator factory."""

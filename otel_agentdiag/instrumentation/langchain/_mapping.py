"""How LangChain's run objects read as GenAI spans: span names, start and end attributes, usage, outcomes, content.

Pure functions of what LangChain passes to a callback (serialized dicts, metadata, ``invocation_params``, an
``LLMResult``, messages, a step's output): none keeps state, starts a span or registers a name. The handler
(:mod:`.callback`) and its run table (:mod:`._runs`) call them; the mapping itself is described in
:mod:`.callback`'s docstring.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation._base import CANCELLATIONS
from otel_agentdiag.instrumentation._values import as_count, put

__all__ = [
    "ERROR_TYPE_TOOL_ERROR",
    "ERROR_TYPE_TOOL_NOT_FOUND",
    "PROVIDER",
    "answers_of",
    "conversation_of",
    "error_tool_messages",
    "llm_end_attributes",
    "llm_span",
    "nonempty_str",
    "one_prompt",
    "run_name",
    "stop_reason",
    "tool_names",
]

PROVIDER = "langchain"
"""``gen_ai.provider.name`` of a model call whose model does not name its provider (``ls_provider``)."""

ERROR_TYPE_TOOL_ERROR = "langchain.tool_error"
"""``error.type`` of a tool call whose error reached the model as a ``ToolMessage(status="error")`` while LangChain
reported no exception (``handle_tool_error=True``, a middleware answering instead of the tool)."""

ERROR_TYPE_TOOL_NOT_FOUND = "langchain.tool_not_found"
"""``error.type`` of a tool call the model made to a tool the agent does not have."""


_MAX_SCAN = 1_000
"""At most this many items of a step's output are looked at for error ``ToolMessage``\\ s."""


def nonempty_str(value: Any) -> str | None:
    """``value`` when it is a non-empty string, else ``None``."""
    return value if isinstance(value, str) and value else None


def run_name(serialized: Any, name: Any) -> str | None:
    """A chain's name: the ``name`` argument (LangChain's ``run_name`` or the runnable's name), else the
    serialized one (``serialized`` is ``None`` for LangGraph's runs)."""
    if nonempty_str(name):
        return str(name)
    if isinstance(serialized, Mapping):
        if nonempty_str(serialized.get("name")):
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, Sequence) and ids and nonempty_str(ids[-1]):
            return str(ids[-1])
    return None


def conversation_of(metadata: Mapping[str, Any] | None) -> str | None:
    if not metadata:
        return None
    for key in ("thread_id", "conversation_id", "session_id"):
        value = metadata.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            return str(value)
    return None


def stop_reason(exc: BaseException) -> str:
    if any(cls.__name__ == "GraphRecursionError" for cls in type(exc).__mro__):
        return sc.STOP_RECURSION_LIMIT
    if type(exc).__name__ in CANCELLATIONS:
        return sc.STOP_CANCELLED
    return sc.STOP_ERROR


def tool_names(tools: Any) -> list[str]:
    """The names of the tools bound to a model call: OpenAI format (``{"type": "function", "function": {"name":
    ...}}``), Anthropic format (``{"name": ...}``) or tool objects."""
    names: list[str] = []
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        return names
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        else:
            name = getattr(tool, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def usage_attributes(usage: Any) -> dict[str, int]:
    """``gen_ai.usage.*`` from an ``AIMessage.usage_metadata``; what it does not report stays absent."""
    out: dict[str, int] = {}
    if not isinstance(usage, Mapping):
        return out
    for key, attribute in (
        ("input_tokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
        ("output_tokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    ):
        value = as_count(usage.get(key))
        put(out, attribute, value)
    details = usage.get("input_token_details")
    if isinstance(details, Mapping):
        for key, attribute in (
            ("cache_read", sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
            ("cache_creation", sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        ):
            value = as_count(details.get(key))
            put(out, attribute, value)
    details = usage.get("output_token_details")
    if isinstance(details, Mapping):
        value = as_count(details.get("reasoning"))
        put(out, sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, value)
    return out


def legacy_usage(llm_output: Any) -> dict[str, int]:
    """``gen_ai.usage.*`` from ``LLMResult.llm_output["token_usage"]`` (plain LLMs that report no
    ``usage_metadata``)."""
    usage = llm_output.get("token_usage") if isinstance(llm_output, Mapping) else None
    out: dict[str, int] = {}
    if isinstance(usage, Mapping):
        prompt, completion = as_count(usage.get("prompt_tokens")), as_count(usage.get("completion_tokens"))
        put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, prompt)
        put(out, sc.GEN_AI_USAGE_OUTPUT_TOKENS, completion)
    return out


def llm_end_attributes(response: Any) -> dict[str, Any]:
    """Response model, response id, finish reasons and usage of an ``LLMResult`` (the first prompt's answers)."""
    attributes: dict[str, Any] = {}
    generations = getattr(response, "generations", None)
    answers = generations[0] if isinstance(generations, Sequence) and generations else []
    finish_reasons: list[str] = []
    usage: dict[str, int] = {}
    for index, generation in enumerate(answers if isinstance(answers, Sequence) else ()):
        message = getattr(generation, "message", None)
        metadata = getattr(message, "response_metadata", None)
        metadata = metadata if isinstance(metadata, Mapping) else {}
        info = getattr(generation, "generation_info", None)
        info = info if isinstance(info, Mapping) else {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason") or info.get("finish_reason")
        if isinstance(reason, str):
            finish_reasons.append(reason)
        if index == 0:
            usage = usage_attributes(getattr(message, "usage_metadata", None))
            model = nonempty_str(metadata.get("model_name")) or nonempty_str(metadata.get("model"))
            put(attributes, sc.GEN_AI_RESPONSE_MODEL, model)
            response_id = nonempty_str(metadata.get("id"))
            put(attributes, sc.GEN_AI_RESPONSE_ID, response_id)
    llm_output = getattr(response, "llm_output", None)
    if not usage:
        usage = legacy_usage(llm_output)
    if sc.GEN_AI_RESPONSE_MODEL not in attributes and isinstance(llm_output, Mapping):
        model = nonempty_str(llm_output.get("model_name"))
        put(attributes, sc.GEN_AI_RESPONSE_MODEL, model)
    if finish_reasons:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(finish_reasons)
    attributes.update(usage)
    return attributes


def one_prompt(batch: Any) -> Any:
    """A model call's prompts (a list per prompt): the one prompt's list when there is one, else them all."""
    if isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) == 1:
        return batch[0]
    return batch


def answers_of(response: Any) -> Any:
    """An ``LLMResult``'s answers: each generation's message (chat) or text (completion), a list per prompt,
    flattened when there is one prompt."""
    generations = getattr(response, "generations", None)
    if not isinstance(generations, Sequence):
        return None
    per_prompt = [
        [g.message if hasattr(g, "message") else getattr(g, "text", None) for g in answers]
        if isinstance(answers, Sequence)
        else []
        for answers in generations
    ]
    return one_prompt(per_prompt)


def error_tool_messages(outputs: Any) -> Iterator[Any]:
    """The ``ToolMessage``\\ s with ``status="error"`` in a step's output (a dict of channels, a list of
    ``Command``\\ s, a list of messages), looking at a bounded number of items."""
    budget = _MAX_SCAN
    stack: list[tuple[Any, int]] = [(outputs, 0)]
    while stack and budget > 0:
        item, depth = stack.pop()
        budget -= 1
        if getattr(item, "type", None) == "tool" and hasattr(item, "tool_call_id"):
            if getattr(item, "status", None) == "error":
                yield item
            continue
        if depth >= 4:
            continue
        if isinstance(item, Mapping):
            stack.extend((value, depth + 1) for value in reversed(list(item.values())[:budget]))
        elif isinstance(item, (list, tuple)):
            stack.extend((value, depth + 1) for value in reversed(item[:budget]))
        else:
            update = getattr(item, "update", None)  # a LangGraph Command
            if isinstance(update, (Mapping, list, tuple)):
                stack.append((update, depth + 1))


def llm_span(operation: str, metadata: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The name and start attributes of a model call's span (``chat`` or ``text_completion``): the model and
    provider LangChain's metadata name (``ls_model_name``, ``ls_provider``), else the invocation parameters."""
    model = (
        nonempty_str(metadata.get("ls_model_name"))
        or nonempty_str(params.get("model"))
        or nonempty_str(params.get("model_name"))
    )
    provider = nonempty_str(metadata.get("ls_provider")) or PROVIDER
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation, sc.GEN_AI_PROVIDER_NAME: provider}
    if model is None:
        return operation, attributes
    attributes[sc.GEN_AI_REQUEST_MODEL] = model
    return f"{operation} {model}", attributes

"""How CrewAI's events read as GenAI spans: span names and attributes, usage, error types, declared names, content.

Pure functions of CrewAI's typed events (``crewai.events.types.*``) and the objects they carry (the agent, the
LLM that emitted a model call's events): none keeps state, starts or ends a span. :class:`~.events.CrewAISpans`,
which keeps the span table, calls them; the mapping itself is described there.

From an event only names, counts, types and the model's identity are read: never a prompt, a backstory, a task
description, tool arguments or results, or CrewAI's own ids (those are content and identifiers; content reaches
:meth:`Node.capture <otel_agentdiag.instrumentation._framework.Node.capture>` only, with capture on).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.declared import register_tools, tool_names
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag._internal.providers import PROVIDER_ALIASES
from otel_agentdiag.instrumentation import _framework
from otel_agentdiag.instrumentation._base import error_type_of
from otel_agentdiag.instrumentation._framework import Node
from otel_agentdiag.instrumentation._values import as_count, as_float, as_int, as_str, put

__all__ = [
    "agent_role",
    "capture_end",
    "capture_start",
    "crew_is_a_run",
    "failure_type",
    "llm_end_attributes",
    "llm_span",
    "register_agent",
    "run_span",
    "tool_span",
    "usage_attributes",
]

_PROVIDER_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.\-]{0,63}")
_REASON_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,31}")
_MAX_TOOLS = 128


def provider_of(llm: Any, model: str | None) -> str | None:
    """``gen_ai.provider.name`` of a CrewAI LLM: its ``provider`` field (``openai``, ``anthropic``, ``gemini``,
    ...), else the prefix of a LiteLLM-style ``provider/model`` string, as the conventions spell it."""
    provider = as_str(getattr(llm, "provider", None))
    if not provider and model and "/" in model:
        provider = model.partition("/")[0]
    if not provider:
        return None
    provider = provider.lower()
    known = PROVIDER_ALIASES.get(provider)
    if known is not None:
        return known
    return provider if _PROVIDER_TOKEN.fullmatch(provider) else None


def _model_name(value: Any) -> str | None:
    """A model string without its LiteLLM ``provider/`` prefix (``openai/gpt-4o-mini`` → ``gpt-4o-mini``)."""
    model = as_str(value)
    if not model:
        return None
    if "/" in model:
        return model.partition("/")[2] or model
    return model


# -- names ----------------------------------------------------------------------------------------------------
def agent_role(agent: Any) -> str | None:
    """The name of an agent's run: its ``role`` (CrewAI's agents are named by role in code)."""
    role = getattr(agent, "role", None) if not isinstance(agent, Mapping) else agent.get("role")
    return role if isinstance(role, str) and role else None


def _tool_names(tools: Any) -> list[str]:
    if not isinstance(tools, (list, tuple)):
        return []
    names = []
    for tool in tools[:_MAX_TOOLS]:
        name = getattr(tool, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def register_agent(names: NameRegistry, role: str | None, tools: Iterable[Any]) -> None:
    """An agent's role and its tools' names are code (``Agent(role=...)``, ``@tool("name")``, ``BaseTool.name``):
    registered, so its spans keep them. Names of another shape than the registry takes stay unregistered."""
    if role is not None:
        names.register_valid("agent", (role,))
    declared = _tool_names(list(tools))
    if declared:
        names.register_valid("tool", declared)


def register_offered_tools(names: NameRegistry, definitions: Any) -> None:
    """The tool definitions a model call offers (OpenAI-shaped, CrewAI's sanitised names): code, registered."""
    register_tools(tool_names(definitions), names)


def crew_is_a_run(crew: Any) -> bool:
    """A crew is a run of its own when it is more than one agent's task (several agents, or several tasks): its
    agents' runs are then nested in it, one trace per kickoff. A crew of one agent and one task is that agent's
    run alone."""
    agents = getattr(crew, "agents", None) or ()
    tasks = getattr(crew, "tasks", None) or ()
    try:
        return len(agents) > 1 or len(tasks) > 1
    except TypeError:
        return False


# -- span starts ----------------------------------------------------------------------------------------------
def run_span(name: str | None, llm: Any = None) -> tuple[str, dict[str, Any]]:
    """An agent's (or a crew's) run: ``invoke_agent {name}``, with the provider of its LLM when known."""
    span_name, attributes = _framework.run_span(name)
    provider = provider_of(llm, as_str(getattr(llm, "model", None))) if llm is not None else None
    put(attributes, sc.GEN_AI_PROVIDER_NAME, provider)
    return span_name, attributes


def llm_span(event: Any, llm: Any) -> tuple[str, dict[str, Any]]:
    """A model call (``llm_call_started``): ``chat {model}`` with provider, model and the request's parameters."""
    raw_model = as_str(getattr(event, "model", None)) or as_str(getattr(llm, "model", None))
    model = _model_name(raw_model)
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}
    put(attributes, sc.GEN_AI_PROVIDER_NAME, provider_of(llm, raw_model))
    put(attributes, sc.GEN_AI_REQUEST_MODEL, model)
    put(attributes, sc.GEN_AI_REQUEST_TEMPERATURE, as_float(getattr(event, "temperature", None)))
    put(attributes, sc.GEN_AI_REQUEST_TOP_P, as_float(getattr(event, "top_p", None)))
    put(attributes, sc.GEN_AI_REQUEST_MAX_TOKENS, as_int(getattr(event, "max_tokens", None)))
    put(attributes, sc.GEN_AI_REQUEST_SEED, as_int(getattr(event, "seed", None)))
    if getattr(event, "stream", None) is True:
        attributes[sc.GEN_AI_REQUEST_STREAM] = True
    return (f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT), attributes


def tool_span(event: Any) -> tuple[str, dict[str, Any]]:
    """A tool call (``tool_usage_started``): ``execute_tool {tool}``; CrewAI's events carry no call id."""
    return _framework.tool_span(as_str(getattr(event, "tool_name", None)) or None, None)


# -- span ends ------------------------------------------------------------------------------------------------
def usage_attributes(usage: Any) -> dict[str, int]:
    """``gen_ai.usage.*`` from a ``llm_call_completed`` event's usage dict (CrewAI's ``prompt_tokens`` /
    ``completion_tokens``, or a provider's ``input_tokens`` / ``output_tokens``). CrewAI fills counts the API did
    not report with 0: all-zero input and output are absent, and cache and reasoning counts only when positive."""
    if not isinstance(usage, Mapping):
        return {}
    out: dict[str, int] = {}
    found_in = as_count(usage.get("prompt_tokens"))
    input_tokens = found_in if found_in is not None else as_count(usage.get("input_tokens"))
    found_out = as_count(usage.get("completion_tokens"))
    output_tokens = found_out if found_out is not None else as_count(usage.get("output_tokens"))
    if not input_tokens and not output_tokens:
        return out
    put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, input_tokens)
    put(out, sc.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens)
    cached = as_count(usage.get("cached_prompt_tokens"))
    if cached:
        out[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cached
    reasoning = as_count(usage.get("reasoning_tokens"))
    if reasoning:
        out[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = reasoning
    return out


def llm_end_attributes(event: Any) -> dict[str, Any]:
    """Usage, finish reason and response id of a ``llm_call_completed`` event (the id goes beside the span, to
    the redactors, never onto it)."""
    attributes: dict[str, Any] = dict(usage_attributes(getattr(event, "usage", None)))
    reason = as_str(getattr(event, "finish_reason", None))
    if reason:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)
    put(attributes, sc.GEN_AI_RESPONSE_ID, as_str(getattr(event, "response_id", None)))
    return attributes


def failure_type(error: Any, handled: BaseException | None, fallback: str) -> str:
    """``error.type`` of a failure event: the exception's class when the event carries the exception (a tool's
    ``tool_usage_error``) or was emitted while CrewAI handled it (``handled``: a model call's or an agent's
    failure event names it only as text); else ``fallback``. Never the message."""
    if isinstance(error, BaseException):
        return error_type_of(error)
    if handled is not None:
        return error_type_of(handled)
    return fallback


def tool_failure_type(event: Any) -> str | None:
    """``error.type`` of a tool call CrewAI reports failed without an exception (``tool_usage_finished`` with a
    ``failure``: an unknown tool, a spent usage limit, a tool that returned a failure): ``crewai.{reason}``."""
    failure = getattr(event, "failure", None)
    if failure is None:
        return None
    reason = getattr(getattr(failure, "reason", None), "value", None)
    if isinstance(reason, str) and _REASON_TOKEN.fullmatch(reason):
        return f"crewai.{reason}"
    return "crewai.tool_failure"


# -- content --------------------------------------------------------------------------------------------------
def capture_start(node: Node, event: Any) -> None:
    """With capture on: what a step was given (an agent's task prompt, a model call's messages and tool
    definitions, a tool's arguments)."""
    if not _content.enabled():
        return
    kind = event.type
    if kind == "agent_execution_started":
        node.capture(sc.CONTENT_INPUT_MESSAGES, getattr(event, "task_prompt", None))
    elif kind == "lite_agent_execution_started":
        node.capture(sc.CONTENT_INPUT_MESSAGES, getattr(event, "messages", None))
    elif kind == "llm_call_started":
        node.capture(sc.CONTENT_INPUT_MESSAGES, getattr(event, "messages", None))
        tools = getattr(event, "tools", None)
        if tools:
            node.capture(sc.CONTENT_TOOL_DEFINITIONS, tools)
    elif kind == "tool_usage_started":
        node.capture(sc.CONTENT_TOOL_ARGUMENTS, getattr(event, "tool_args", None))


def capture_end(node: Node, event: Any) -> None:
    """With capture on: what a step gave back (an agent's output, a model's answer, a tool's result or the
    error CrewAI told the model)."""
    if not _content.enabled():
        return
    kind = event.type
    if kind in ("agent_execution_completed", "lite_agent_execution_completed"):
        node.capture(sc.CONTENT_OUTPUT_MESSAGES, getattr(event, "output", None))
    elif kind == "llm_call_completed":
        node.capture(sc.CONTENT_OUTPUT_MESSAGES, getattr(event, "response", None))
    elif kind == "tool_usage_finished":
        node.capture(sc.CONTENT_TOOL_RESULT, getattr(event, "output", None))
    elif kind == "tool_usage_error":
        node.capture(sc.CONTENT_TOOL_RESULT, str(getattr(event, "error", "")))

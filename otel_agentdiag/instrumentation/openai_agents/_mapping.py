"""How the Agents SDK's span data reads as GenAI spans: span names and attributes, error types, usage, content.

Pure functions of the SDK's typed ``span_data`` (and its error records): none keeps state, starts or ends a span
or registers a name. :class:`~.processor.AgentDiagTracingProcessor`, which keeps the span table, calls them;
the mapping itself is described in :mod:`.processor`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation._framework import Node
from otel_agentdiag.instrumentation._values import as_count, field_of, put

__all__ = [
    "PROVIDER",
    "capture_model_call",
    "capture_tool_call",
    "guardrail_end_attributes",
    "guardrail_span",
    "handoff_end_attributes",
    "handoff_span",
    "iteration_span",
    "llm_end_attributes",
    "model_span",
    "other_span",
    "run_attributes",
    "sdk_error_type",
    "stop_reason",
    "tool_calls",
    "tool_span",
    "usage_attributes",
]

PROVIDER = "openai"
"""``gen_ai.provider.name`` of the SDK's model calls (its models speak the OpenAI APIs)."""

_ERROR_TYPES: Mapping[str, str] = {
    "Max turns exceeded": "agents.MaxTurnsExceeded",
    "Guardrail tripwire triggered": "agents.guardrail_tripwire",
    "Error running tool": "agents.tool_error",
    "Error running tool (non-fatal)": "agents.tool_error",
    "Tool execution cancelled": "agents.tool_cancelled",
    "Tool not found": "agents.tool_not_found",
    "Multiple handoffs requested": "agents.multiple_handoffs",
    "Error getting response": "agents.model_error",
    "Error streaming response": "agents.model_error",
    "Error in agent run": "agents.agent_error",
    "Invalid JSON provided": "agents.invalid_json",
}
"""The SDK's fixed error messages and the ``error.type`` each becomes. A message not listed (it may quote
data) becomes ``agents.SpanError``; the message itself never reaches a span."""

_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_SPAN_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_CANCELLED = "agents.tool_cancelled"


def sdk_error_type(error: Any) -> str | None:
    if not error:
        return None
    message = error.get("message") if isinstance(error, Mapping) else None
    known = _ERROR_TYPES.get(message) if isinstance(message, str) else None
    if known is not None:
        return known
    data = error.get("data") if isinstance(error, Mapping) else None
    # Some models report the exception's class as data["name"]: a class name is code, not data.
    name = data.get("name") if isinstance(data, Mapping) else None
    if isinstance(name, str) and _CLASS_NAME.fullmatch(name):
        return name
    return "agents.SpanError"


def stop_reason(error_type: str) -> str:
    if error_type == "agents.MaxTurnsExceeded":
        return sc.STOP_MAX_TURNS
    if error_type == "agents.guardrail_tripwire":
        return sc.STOP_GUARDRAIL
    if error_type == _CANCELLED:
        return sc.STOP_CANCELLED
    return sc.STOP_ERROR


def usage_attributes(usage: Any) -> dict[str, int]:
    """``gen_ai.usage.*`` from the SDK's per-call usage dict. All-zero counts are what the SDK records when
    the API reported nothing (a stream without ``include_usage``): absent, not 0."""
    if not isinstance(usage, Mapping):
        return {}
    out: dict[str, int] = {}
    input_tokens, output_tokens = as_count(usage.get("input_tokens")), as_count(usage.get("output_tokens"))
    if not input_tokens and not output_tokens:
        return out
    put(out, sc.GEN_AI_USAGE_INPUT_TOKENS, input_tokens)
    put(out, sc.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens)
    details = usage.get("input_tokens_details")
    if isinstance(details, Mapping) and as_count(details.get("cached_tokens")) is not None:
        out[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = details["cached_tokens"]
    details = usage.get("output_tokens_details")
    if isinstance(details, Mapping) and as_count(details.get("reasoning_tokens")) is not None:
        out[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = details["reasoning_tokens"]
    return out


def tool_calls(data: Any) -> list[tuple[str, str]]:
    """``(tool name, call id)`` of each tool call in a model's answer, in order: from a generation's
    ``output`` (chat-completions messages, or the Responses-shaped answer a streamed call records), or from a
    response's ``output`` items."""
    calls: list[tuple[str, str]] = []

    def items(output: Any) -> None:
        for item in output or ():
            if field_of(item, "type") == "function_call":
                name, call_id = field_of(item, "name"), field_of(item, "call_id")
                if isinstance(name, str) and isinstance(call_id, str):
                    calls.append((name, call_id))

    if data.type == "generation":
        if not isinstance(data.output, (list, tuple)):
            return calls
        for message in data.output:
            for call in field_of(message, "tool_calls") or ():
                name, call_id = field_of(field_of(call, "function"), "name"), field_of(call, "id")
                if isinstance(name, str) and isinstance(call_id, str):
                    calls.append((name, call_id))
            items(field_of(message, "output"))
    else:
        items(field_of(data.response, "output"))
    return calls


def _answer(output: Any) -> Any:
    """A generation's recorded answer as output messages. A streamed chat-completions call records the
    Responses-shaped answer the SDK assembled (``[response.model_dump()]``): its ``output`` items are the
    answer, the rest (a made-up id, empty ``tools``) is the SDK's scaffolding."""
    if isinstance(output, list) and len(output) == 1:
        only = output[0]
        if isinstance(only, Mapping) and only.get("object") == "response" and isinstance(only.get("output"), list):
            return only["output"]
    return output


def capture_model_call(node: Node, data: Any) -> None:
    """Content of a generation or response step, from what the SDK recorded (nothing without sensitive
    data)."""
    if data.input is not None:
        node.capture(sc.CONTENT_INPUT_MESSAGES, data.input)
    if data.type == "generation":
        if data.output is not None:
            node.capture(sc.CONTENT_OUTPUT_MESSAGES, _answer(data.output))
        return
    response = data.response
    if response is None:
        return
    output, instructions = field_of(response, "output"), field_of(response, "instructions")
    tools = field_of(response, "tools")
    if output is not None:
        node.capture(sc.CONTENT_OUTPUT_MESSAGES, output)
    if instructions is not None:
        node.capture(sc.CONTENT_SYSTEM_INSTRUCTIONS, instructions)
    if tools:
        node.capture(sc.CONTENT_TOOL_DEFINITIONS, tools)


def capture_tool_call(node: Node, data: Any, error: Any) -> None:
    """Content of a function step. The SDK records ``input`` (before the tool runs) only when the run traces
    sensitive data: without it, nothing is captured, not even the (then redacted) error record."""
    arguments = data.input
    if arguments is None:
        return
    node.capture(sc.CONTENT_TOOL_ARGUMENTS, arguments)
    if data.output is not None:
        node.capture(sc.CONTENT_TOOL_RESULT, data.output)
    elif error:
        node.capture(sc.CONTENT_TOOL_RESULT, error)


# -- span starts: (span name, start attributes) of each kind of step ------------------------------------------
def run_attributes(agent: str | None) -> dict[str, Any]:
    """The start attributes of a run's ``invoke_agent`` span."""
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_PROVIDER_NAME: PROVIDER}
    if agent is not None:
        attributes[sc.GEN_AI_AGENT_NAME] = str(agent)
    return attributes


def iteration_span(data: Any) -> tuple[str, dict[str, Any]]:
    """A turn: ``agent.iteration`` with the turn's index, 0-based as every integration's (the SDK counts its turns
    from 1; 0 when the SDK's is not a count)."""
    turn = as_count(data.turn)
    index = max(turn - 1, 0) if turn is not None else 0
    return sc.ITERATION_SPAN_NAME, {sc.AGENTDIAG_ITERATION_INDEX: index}


def model_span(data: Any) -> tuple[str, dict[str, Any]]:
    """A generation or response step: ``chat {model}`` (``chat`` when the step names no model)."""
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_PROVIDER_NAME: PROVIDER}
    model = getattr(data, "model", None)
    if isinstance(model, str) and model:
        attributes[sc.GEN_AI_REQUEST_MODEL] = model
        return f"{sc.OP_CHAT} {model}", attributes
    return sc.OP_CHAT, attributes


def tool_span(data: Any, tool: str, call_id: str | None) -> tuple[str, dict[str, Any]]:
    """A function step: ``execute_tool {tool}``, an ``extension`` tool when it is an MCP server's."""
    attributes: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: tool,
        sc.GEN_AI_TOOL_TYPE: "extension" if getattr(data, "mcp_data", None) else "function",
    }
    put(attributes, sc.GEN_AI_TOOL_CALL_ID, call_id)
    return f"{sc.OP_EXECUTE_TOOL} {tool}", attributes


def handoff_span(data: Any) -> tuple[str, dict[str, Any]]:
    """A handoff: an ``execute_tool`` span, named after its transfer tool when it ends (the target is known)."""
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_TYPE: "function"}
    if isinstance(data.from_agent, str):
        attributes[sc.AGENTDIAG_HANDOFF_SOURCE_AGENT] = data.from_agent
    return sc.OP_EXECUTE_TOOL, attributes


def guardrail_span(data: Any) -> tuple[str, dict[str, Any]]:
    """A guardrail: ``agentdiag.guardrail`` with its name."""
    return sc.GUARDRAIL_SPAN_NAME, {sc.AGENTDIAG_GUARDRAIL_NAME: str(data.name)}


def other_span(kind: Any) -> tuple[str, dict[str, Any]]:
    """Any other step: ``agentdiag.framework_step`` with the SDK's span type when it is a plain token."""
    attributes: dict[str, Any] = {}
    if isinstance(kind, str) and _SPAN_TYPE.fullmatch(kind):
        attributes[sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE] = kind
    return sc.FRAMEWORK_SPAN_NAME, attributes


# -- span ends: the attributes each kind of step adds ---------------------------------------------------------
def llm_end_attributes(data: Any) -> dict[str, Any]:
    """Usage, request model, response model and response id of a generation or response step."""
    attributes: dict[str, Any] = usage_attributes(getattr(data, "usage", None))
    model = getattr(data, "model", None)
    if isinstance(model, str) and model:
        attributes[sc.GEN_AI_REQUEST_MODEL] = model
    response = getattr(data, "response", None)
    if response is not None:
        response_model, response_id = field_of(response, "model"), field_of(response, "id")
        if isinstance(response_model, str):
            attributes[sc.GEN_AI_RESPONSE_MODEL] = response_model
        if isinstance(response_id, str):
            attributes[sc.GEN_AI_RESPONSE_ID] = response_id
    return attributes


def handoff_end_attributes(data: Any) -> dict[str, Any]:
    """Source and target agent of a handoff, and its transfer tool's name (``transfer_to_{target}``)."""
    attributes: dict[str, Any] = {}
    source, target = data.from_agent, data.to_agent
    if isinstance(source, str):
        attributes[sc.AGENTDIAG_HANDOFF_SOURCE_AGENT] = source
    if isinstance(target, str):
        attributes[sc.AGENTDIAG_HANDOFF_TARGET_AGENT] = target
        attributes[sc.GEN_AI_TOOL_NAME] = f"transfer_to_{target}"
    return attributes


def guardrail_end_attributes(data: Any) -> dict[str, Any]:
    """Whether a guardrail's tripwire triggered."""
    return {sc.AGENTDIAG_GUARDRAIL_TRIGGERED: bool(getattr(data, "triggered", False))}

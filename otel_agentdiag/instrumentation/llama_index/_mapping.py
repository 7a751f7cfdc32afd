"""What a LlamaIndex step's span is called and carries: pure functions over the objects the dispatcher reports.

No import of LlamaIndex here: values are read with ``getattr`` and type checks, so a release that moves a field
gives a span with fewer attributes, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.providers import provider_of_module
from otel_agentdiag.instrumentation._values import as_count, field_of, put

__all__ = [
    "ERROR_TYPE_TOOL_ERROR",
    "MODEL_METHODS",
    "PROVIDER",
    "TOOL_METHODS",
    "declared_names",
    "llm_span",
    "messages_content",
    "method_of",
    "response_attributes",
    "tool_arguments",
    "tool_name",
]

PROVIDER = "llama_index"
"""``gen_ai.provider.name`` of a model call whose LLM class names no provider we know: LlamaIndex's LLM classes do not
name their provider in a common field, but its integrations live in ``llama_index.llms.<provider>`` packages
(``llama_index.llms.openai`` → ``openai``), which is read first."""
_LLM_PACKAGES = "llama_index.llms."

ERROR_TYPE_TOOL_ERROR = "llama_index.tool_error"
"""``error.type`` of a tool call whose ``ToolOutput`` says ``is_error`` while the tool raised nothing."""

MODEL_METHODS = frozenset(
    {"chat", "achat", "stream_chat", "astream_chat", "complete", "acomplete", "stream_complete", "astream_complete"}
)
"""The methods of an LLM that are one model call (the outermost of them, when they nest, owns the span)."""

TOOL_METHODS = frozenset({"call", "acall", "__call__"})
"""The methods of a tool that are one tool call (the outermost of them owns the span)."""

_MAX_NAME = 256


def _name(value: Any) -> str | None:
    return value if type(value) is str and 0 < len(value) <= _MAX_NAME else None


def method_of(span_id: Any) -> str:
    """The method a dispatcher span id names: ``"FunctionAgent.run-<uuid4>"`` → ``"run"`` ("" if not that shape)."""
    if type(span_id) is not str:
        return ""
    head = span_id.split("-", 1)[0]
    return head.rpartition(".")[2]


def agent_name(workflow: Any) -> str | None:
    """The agent a workflow run is: a workflow agent's ``name``, an ``AgentWorkflow``'s ``root_agent``."""
    return _name(getattr(workflow, "name", None)) or _name(getattr(workflow, "root_agent", None))


def _tools_of(agent: Any) -> Iterator[str]:
    tools = getattr(agent, "tools", None)
    if isinstance(tools, (list, tuple)):
        for tool in tools:
            name = _name(getattr(getattr(tool, "metadata", None), "name", None))
            if name is not None:
                yield name


def declared_names(workflow: Any) -> tuple[list[str], list[str]]:
    """The agent and tool names a workflow's definitions declare (code): ``(agents, tools)``."""
    agents: list[str] = []
    tools: list[str] = []
    members: Iterable[Any] = ()
    team = getattr(workflow, "agents", None)
    if isinstance(team, Mapping):  # an AgentWorkflow: its agents by name
        members = list(team.values())
        agents.extend(n for n in team if _name(n) is not None)
    else:
        members = (workflow,)
    for member in members:
        name = _name(getattr(member, "name", None))
        if name is not None:
            agents.append(name)
        tools.extend(_tools_of(member))
    if isinstance(team, Mapping) and len(team) > 1:
        tools.append("handoff")  # the tool AgentWorkflow adds to pass control between its agents
    return agents, tools


def llm_span(llm: Any, method: str) -> tuple[str, dict[str, Any]]:
    """The name and start attributes of a model call's span: ``chat`` or ``text_completion``, the model from the
    LLM's ``metadata.model_name`` (LlamaIndex's ``"unknown"`` placeholder is no model)."""
    operation = sc.OP_TEXT_COMPLETION if "complete" in method else sc.OP_CHAT
    provider = provider_of_module(type(llm).__module__, _LLM_PACKAGES) or PROVIDER
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation, sc.GEN_AI_PROVIDER_NAME: provider}
    try:
        model = _name(getattr(getattr(llm, "metadata", None), "model_name", None))
    except Exception:  # noqa: BLE001 - a metadata property of a third-party LLM class may raise
        model = None
    if model is None or model == "unknown":
        model = _name(getattr(llm, "model", None))
    if model is None:
        return operation, attributes
    attributes[sc.GEN_AI_REQUEST_MODEL] = model
    return f"{operation} {model}", attributes


def tool_name(tool: Any) -> str | None:
    """The name of a tool's ``execute_tool`` span: its ``metadata.name``."""
    return _name(getattr(getattr(tool, "metadata", None), "name", None))


_USAGE_FIELDS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
    ("input_tokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
    ("completion_tokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    ("output_tokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
)


def _usage(source: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for field, key in _USAGE_FIELDS:
        if key not in out:  # the first of a key's two field names that holds a count
            put(out, key, as_count(field_of(source, field)))
    return out


def response_attributes(response: Any) -> dict[str, Any]:
    """Usage and response model of a ``ChatResponse`` / ``CompletionResponse``: the provider's ``usage`` in its
    ``raw`` response (a mapping or the client's object; OpenAI's and Anthropic's field names), else the counts
    LlamaIndex's integrations copy into ``additional_kwargs``. Absent usage stays absent."""
    raw = getattr(response, "raw", None)
    attributes: dict[str, Any] = {}
    usage = field_of(raw, "usage") if raw is not None else None
    if usage is not None:
        attributes.update(_usage(usage))
    if not attributes:
        extra = getattr(response, "additional_kwargs", None)
        if isinstance(extra, Mapping):
            attributes.update(_usage(extra))
    model = _name(field_of(raw, "model")) if raw is not None else None
    put(attributes, sc.GEN_AI_RESPONSE_MODEL, model)
    return attributes


def messages_content(messages: Any) -> Any:
    """Content capture only: LlamaIndex ``ChatMessage`` s as ``[{"role", "content"}]`` (a prompt string as is)."""
    if isinstance(messages, str) or messages is None:
        return messages
    out = []
    for message in messages if isinstance(messages, (list, tuple)) else (messages,):
        role = getattr(message, "role", None)
        out.append({"role": str(getattr(role, "value", role)), "content": getattr(message, "content", None)})
    return out


def tool_arguments(arguments: Mapping[str, Any]) -> Any:
    """Content capture only: what a tool was called with (its keyword arguments, else its positional ones)."""
    kwargs = arguments.get("kwargs")
    if isinstance(kwargs, Mapping) and kwargs:
        return dict(kwargs)
    args = arguments.get("args")
    if isinstance(args, tuple) and args:
        return list(args)
    return {k: v for k, v in arguments.items() if k not in ("self", "args", "kwargs")}

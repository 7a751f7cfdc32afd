"""The adapter for OpenLLMetry: the kind from ``traceloop.span.kind`` or ``llm.request.type``, and its usage keys.

Traceloop's ``opentelemetry-instrumentation-*`` and ``traceloop-sdk``, whose keys
``opentelemetry-semantic-conventions-ai`` defines:

- ``traceloop.span.kind``: ``agent`` → ``run`` (``invoke_agent {agent}``, the agent from
  ``traceloop.entity.name``); ``workflow`` → ``run`` (operation ``invoke_workflow``); ``tool`` → ``tool``
  (``execute_tool {tool}``, the tool from ``traceloop.entity.name``); ``task`` and anything else → ``other``
  (type ``task``, ...).
- ``llm.request.type`` (spans before OpenLLMetry adopted ``gen_ai.operation.name``): ``chat`` → ``llm``
  (``chat``), ``completion`` → ``llm`` (``text_completion``), ``embedding`` → ``llm`` (``embeddings``),
  ``rerank`` → ``llm`` (``rerank``).
- Usage: ``gen_ai.usage.prompt_tokens`` / ``completion_tokens`` (and the older cache and reasoning keys) →
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` / ..., as for the GenAI conventions.

A span that names its ``gen_ai.operation.name`` (OpenLLMetry 0.4x+) keeps it. ``traceloop.entity.input`` /
``output``, ``gen_ai.prompt.*`` and ``gen_ai.completion.*`` are content: never moved to attributes (a tool's
entity input and output are named as content for the local store's capture).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline.adapters import genai
from otel_agentdiag.pipeline.adapters._common import GENAI_CONTENT, Mapped, copy_if_absent, copy_tokens, is_text

__all__ = ["OPENAI_AGENTS_SCOPE", "SPAN_KIND", "adapt", "recognises"]

SPAN_KIND = "traceloop.span.kind"
REQUEST_TYPE = "llm.request.type"
ENTITY_NAME = "traceloop.entity.name"

_REQUEST_OPERATIONS = {
    "chat": sc.OP_CHAT,
    "completion": sc.OP_TEXT_COMPLETION,
    "embedding": sc.OP_EMBEDDINGS,
    "rerank": "rerank",
}
_TOOL_CONTENT: tuple[tuple[str, str], ...] = (
    ("traceloop.entity.input", sc.CONTENT_TOOL_ARGUMENTS),
    ("traceloop.entity.output", sc.CONTENT_TOOL_RESULT),
)

_SPAN_KINDS = {
    "agent": (sc.KIND_RUN, sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME),
    "workflow": (sc.KIND_RUN, sc.OP_INVOKE_WORKFLOW, None),
    "tool": (sc.KIND_TOOL, sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME),
}


def recognises(attributes: Mapping[str, Any]) -> bool:
    return SPAN_KIND in attributes or REQUEST_TYPE in attributes


OPENAI_AGENTS_SCOPE = "opentelemetry.instrumentation.openai_agents"
"""OpenLLMetry's OpenAI Agents SDK instrumentor: its agent and tool spans are named, at start, after the SDK's
``Agent`` and ``FunctionTool`` objects (the SDK runs no tool it was not given): declared names."""


def adapt(attributes: Mapping[str, Any], scope: str | None = None) -> Mapped:
    """Our kind and keys for an OpenLLMetry span (``scope``: its instrumentation scope's name). Pure; a kind of
    the wrong type or unknown is ``other``."""
    span_kind = attributes.get(SPAN_KIND)
    if type(span_kind) is str and is_text(span_kind):
        known = _SPAN_KINDS.get(span_kind)
        if known is not None:
            kind, step_operation, name_key = known
            moved: dict[str, Any] = {}
            if sc.GEN_AI_OPERATION_NAME not in attributes:
                moved[sc.GEN_AI_OPERATION_NAME] = step_operation
            if name_key is not None:
                copy_if_absent(attributes, moved, ENTITY_NAME, name_key)
            declared: tuple[str, ...] = ()
            if scope == OPENAI_AGENTS_SCOPE and name_key is not None:
                name = attributes.get(name_key, moved.get(name_key))
                declared = (name,) if is_text(name) and len(name) <= 128 else ()
            return Mapped(
                kind,
                moved,
                content=_TOOL_CONTENT if kind == sc.KIND_TOOL else GENAI_CONTENT,
                agents=declared if kind == sc.KIND_RUN else (),
                tools=declared if kind == sc.KIND_TOOL else (),
            )
        if span_kind in ("task", "unknown") and sc.GEN_AI_OPERATION_NAME not in attributes:
            return Mapped(sc.KIND_OTHER, {}, name=sc.FRAMEWORK_SPAN_NAME, span_type=span_kind)
    request_type = attributes.get(REQUEST_TYPE)
    operation = _REQUEST_OPERATIONS.get(request_type) if type(request_type) is str else None
    if sc.GEN_AI_OPERATION_NAME in attributes or operation is None:
        return genai.adapt(attributes, scope)  # an operation of its own, or none we know: `other`
    out: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation}
    copy_if_absent(attributes, out, sc.GEN_AI_SYSTEM, sc.GEN_AI_PROVIDER_NAME)
    copy_tokens(attributes, out, genai.OLD_USAGE)
    return Mapped(sc.KIND_LLM, out, content=GENAI_CONTENT)

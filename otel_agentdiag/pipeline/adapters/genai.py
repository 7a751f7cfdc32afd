"""The adapter for the official OpenTelemetry GenAI conventions: the kind from ``gen_ai.operation.name``.

As the official instrumentations (``opentelemetry-instrumentation-genai-*``, ``opentelemetry-util-genai``),
OpenLLMetry 0.4x+ and frameworks with their own OpenTelemetry output (Pydantic AI, Google ADK, Strands) emit them.

Our span model *is* these conventions, so little moves: the operation gives the kind (``invoke_agent``,
``invoke_workflow`` → ``run``; ``chat``, ``text_completion``, ``generate_content``, ``embeddings`` → ``llm``;
``execute_tool`` → ``tool``; ``create_agent`` (building an agent, not running it), ``retrieval``, ``plan`` and
unknown operations → ``other``), the older usage keys (``gen_ai.usage.prompt_tokens`` / ``completion_tokens``)
move to ``input_tokens`` / ``output_tokens``, and ``gen_ai.system`` fills a missing ``gen_ai.provider.name``.

Roll-ups: Pydantic AI writes the sum of a run's usage on its ``invoke_agent`` span as
``gen_ai.aggregated_usage.*`` (its own namespace, so that backends summing ``gen_ai.usage.*`` do not count it
twice). On a ``run`` it moves to our roll-up keys (``agentdiag.usage.*``), never to leaf usage; on any other kind
it stays where it is (the redactor drops it: no policy names it).

Conversations: ``session.id`` (the general conventions' session, which frameworks such as Strands put on every span
of a run from their trace attributes) fills a missing ``gen_ai.conversation.id`` (a digest once exported).

Google ADK's merge of parallel tool calls: when one answer asks for several tools, ADK runs each under its own
``execute_tool {tool}`` span and then opens ``execute_tool (merged)`` (scope :data:`GOOGLE_ADK_SCOPE`,
``gen_ai.tool.name`` its placeholder :data:`ADK_MERGED_TOOLS`) around the merge of their answers: no tool call,
a step (kind ``other``, type :data:`MERGED_TOOL_CALLS`; the adapter drops its operation).

Loop steps: the conventions have no operation for one. A span that carries a framework's own loop-step key is an
iteration (``agent.iteration``; its ``agentdiag.iteration.index`` kept when an instrumentor of ours set one):
Strands' ``execute_event_loop_cycle`` spans, marked by its ``event_loop.cycle_id`` (:data:`LOOP_STEP_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline.adapters._common import (
    GENAI_CONTENT,
    OPERATION_KINDS,
    Mapped,
    copy_if_absent,
    copy_tokens,
)
from otel_agentdiag.redaction import keys as _keys

__all__ = [
    "ADK_MERGED_TOOLS",
    "AG2_SCOPE",
    "AGENT_DECLARING_SCOPES",
    "AGGREGATED_USAGE",
    "AUTOGEN_CORE_SCOPE",
    "CONVERSATION",
    "GOOGLE_ADK_SCOPE",
    "LOOP_STEP_KEYS",
    "MERGED_TOOL_CALLS",
    "OLD_USAGE",
    "SEMANTIC_KERNEL_AGENTS_SCOPE",
    "VENDOR_FINISH_REASONS",
    "adapt",
    "recognises",
]

LOOP_STEP_KEYS: dict[str, str] = {"execute_event_loop_cycle": "event_loop.cycle_id"}
"""A framework's loop-step operation → the key of its own that marks the span as one (Strands' event-loop cycle)."""

OLD_USAGE: tuple[tuple[str, str], ...] = (
    ("gen_ai.usage.prompt_tokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
    ("gen_ai.usage.completion_tokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    ("gen_ai.usage.cache_read_input_tokens", sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
    ("gen_ai.usage.cache_creation_input_tokens", sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
    ("gen_ai.usage.reasoning_tokens", sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
    ("gen_ai.usage.cache_write.input_tokens", sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
)
"""Older semantic-convention (and OpenLLMetry) usage keys, and the Anthropic SDK's own spelling of cache writes
(``gen_ai.usage.cache_write.input_tokens``, also ``opentelemetry-util-genai``'s) → today's."""

VENDOR_FINISH_REASONS: tuple[str, ...] = ("gen_ai.response.finish_reason", "anthropic.message.stop_reason")
"""Keys other libraries give the one finish reason of an answer (Semantic Kernel's singular
``gen_ai.response.finish_reason``, the Anthropic SDK's own spans' stop reason), read when the span has no
``gen_ai.response.finish_reasons``."""

AGGREGATED_USAGE: tuple[tuple[str, str], ...] = tuple(
    (
        "gen_ai.aggregated_usage." + key[len(sc.GEN_AI_USAGE_PREFIX) :],
        sc.AGENTDIAG_USAGE_PREFIX + key[len(sc.GEN_AI_USAGE_PREFIX) :],
    )
    for key in sorted(_keys.GEN_AI_USAGE_KEYS)
)
"""A run's roll-up as Pydantic AI writes it (``gen_ai.aggregated_usage.*``) → our roll-up keys."""


def recognises(attributes: Mapping[str, Any]) -> bool:
    """Whether the span speaks the GenAI conventions: it names its operation."""
    return sc.GEN_AI_OPERATION_NAME in attributes


AG2_SCOPE = "opentelemetry.instrumentation.ag2"
"""AG2's own instrumentation (``autogen.opentelemetry``): its ``conversation`` span is the run of a chat between
agents, each ``invoke_agent`` inside it one agent's reply (a step: :mod:`otel_agentdiag.pipeline.loop`)."""
CONVERSATION = "conversation"
SEMANTIC_KERNEL_AGENTS_SCOPE = "semantic_kernel.utils.telemetry.agent_diagnostics.decorators"
"""Semantic Kernel's agent diagnostics: its ``invoke_agent`` span names the agent object of the code."""
AGENT_DECLARING_SCOPES = frozenset({AG2_SCOPE, SEMANTIC_KERNEL_AGENTS_SCOPE})
"""Scopes whose run spans name an agent object of the code (``gen_ai.agent.name``): declared."""
AUTOGEN_CORE_SCOPE = "autogen-core"
"""autogen-core's own spans: its ``execute_tool`` span is opened by the tool object itself, under its own name."""
GOOGLE_ADK_SCOPE = "gcp.vertex.agent"
"""Google ADK's own spans (its tracer's scope)."""
ADK_MERGED_TOOLS = "(merged tools)"
"""The ``gen_ai.tool.name`` ADK gives the span around the merge of parallel tool calls' answers."""
MERGED_TOOL_CALLS = "merged_tool_calls"
"""``agentdiag.framework.span_type`` of that span: a step, not a tool call (each call has its own span)."""


def adapt(attributes: Mapping[str, Any], scope: str | None = None) -> Mapped:
    """The span's kind from its operation, and the older usage and provider keys moved to today's (``scope``: the
    instrumentation scope's name, for AG2's ``conversation``). Pure."""
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    kind = OPERATION_KINDS.get(operation, sc.KIND_OTHER) if type(operation) is str else sc.KIND_OTHER
    if operation == CONVERSATION and scope == AG2_SCOPE:
        kind = sc.KIND_RUN  # (the trace's rebuild names it the run of the agent that answers: invoke_agent)
    out: dict[str, Any] = {}
    copy_if_absent(attributes, out, sc.GEN_AI_SYSTEM, sc.GEN_AI_PROVIDER_NAME)
    copy_if_absent(attributes, out, sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID)
    if kind == sc.KIND_TOOL and scope == GOOGLE_ADK_SCOPE and attributes.get(sc.GEN_AI_TOOL_NAME) == ADK_MERGED_TOOLS:
        return Mapped(sc.KIND_OTHER, out, name=sc.FRAMEWORK_SPAN_NAME, span_type=MERGED_TOOL_CALLS)
    if kind == sc.KIND_OTHER and type(operation) is str:
        marker = LOOP_STEP_KEYS.get(operation)
        if marker is not None and marker in attributes:
            return Mapped(sc.KIND_ITERATION, out, name=sc.ITERATION_SPAN_NAME)
    if kind == sc.KIND_LLM:
        copy_tokens(attributes, out, OLD_USAGE)
        if sc.GEN_AI_RESPONSE_FINISH_REASONS not in attributes:
            for key in VENDOR_FINISH_REASONS:
                reason = attributes.get(key)
                if type(reason) is str and 0 < len(reason) <= 64:
                    out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)  # the policy's closed set judges it
                    break
    elif kind == sc.KIND_RUN:
        copy_tokens(attributes, out, AGGREGATED_USAGE)
    span_type = None
    if kind == sc.KIND_OTHER:
        # A step with an operation we have no kind for: named by its (checked) operation, typed for `show`.
        span_type = operation if type(operation) is str and operation.isidentifier() and len(operation) <= 32 else None
    agents: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    if scope in AGENT_DECLARING_SCOPES and kind == sc.KIND_RUN:
        # AG2 (its ConversableAgent objects) and Semantic Kernel (its agent objects) name these spans after agents
        # of the code (their `name`): declared.
        agent = attributes.get(sc.GEN_AI_AGENT_NAME)
        agents = (agent,) if type(agent) is str and 0 < len(agent) <= 128 else ()
    elif scope == AUTOGEN_CORE_SCOPE and kind == sc.KIND_TOOL:
        # autogen-core opens its tool span in the tool object's own run (BaseTool.run_json): its name is code.
        tool = attributes.get(sc.GEN_AI_TOOL_NAME)
        tools = (tool,) if type(tool) is str and 0 < len(tool) <= 128 else ()
    return Mapped(kind, out, span_type=span_type, content=GENAI_CONTENT, agents=agents, tools=tools)

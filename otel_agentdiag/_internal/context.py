"""OpenTelemetry context keys through which an agent run reaches its children."""

from __future__ import annotations

from opentelemetry import context as otel_context

CONVERSATION_ID_KEY = otel_context.create_key("agentdiag-conversation-id")
"""Raw conversation id of the enclosing agent run (hashed by the redacting processor, never exported raw)."""

AGENT_NAME_KEY = otel_context.create_key("agentdiag-agent-name")
"""Name of the enclosing agent run."""


def current_conversation_id(ctx: otel_context.Context | None = None) -> str | None:
    value = otel_context.get_value(CONVERSATION_ID_KEY, ctx)
    return value if isinstance(value, str) else None


LLM_CALL_KEY = otel_context.create_key("agentdiag-llm-call")
"""The model call in progress (an ``instrumentation._base.LLMCallState``): who owns its span, where its HTTP
attempts are recorded. A client instrumentation that finds one already set enriches it instead of starting a
second LLM span for the same call."""

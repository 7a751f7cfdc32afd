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

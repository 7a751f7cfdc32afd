"""otel-agentdiag: OpenTelemetry-native tracing for AI agents, with fail-closed redaction.

Quick start::

    import otel_agentdiag as agentdiag

    agentdiag.configure(service_name="my-agent")        # SQLite store at ./.agentdiag/traces.db
    with agentdiag.agent_run("my-agent", conversation_id=session_id):
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                ...
                call.record_response(input_tokens=120, output_tokens=15)
"""

from otel_agentdiag.config import AgentDiag, AgentDiagOptions, configure
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.instrumentation.manual import (
    LLMCall,
    agent,
    agent_run,
    iteration,
    llm_call,
    register_names,
    tool,
    tool_call,
)
from otel_agentdiag.pipeline.audit import ForeignProcessor, foreign_processors
from otel_agentdiag.redacting import redacting_processor
from otel_agentdiag.redaction import IdHasher, Policy, PolicyError, RedactingSpanProcessor, load_policy
from otel_agentdiag.storage import SpanStore, StoreError
from otel_agentdiag.version import __version__

__all__ = [
    "AgentDiag",
    "AgentDiagOptions",
    "ForeignProcessor",
    "IdHasher",
    "LLMCall",
    "Policy",
    "PolicyError",
    "RedactingSpanProcessor",
    "SQLiteSpanExporter",
    "SpanStore",
    "StoreError",
    "__version__",
    "agent",
    "agent_run",
    "configure",
    "foreign_processors",
    "iteration",
    "llm_call",
    "load_policy",
    "redacting_processor",
    "register_names",
    "tool",
    "tool_call",
]

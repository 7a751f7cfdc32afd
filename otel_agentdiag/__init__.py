"""otel-agentdiag: OpenTelemetry-native tracing for AI agents, with fail-closed redaction.

Quick start::

    import otel_agentdiag as agentdiag

    agentdiag.configure(service_name="my-agent")        # SQLite store at ./.agentdiag/traces.db
    with agentdiag.agent_run("my-agent", conversation_id=session_id):
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                ...
                call.record_response(input_tokens=120, output_tokens=15)

Every public name is imported on first use (PEP 562), so ``import otel_agentdiag`` and the ``agentdiag`` command
do not pay for the parts they do not use; ``from otel_agentdiag import X`` works as always.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_agentdiag._internal.lazy import lazy_attributes
from otel_agentdiag.version import __version__

if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from otel_agentdiag.config import AgentDiag, AgentDiagOptions, configure
    from otel_agentdiag.cost import Budget, PriceTableError
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

_LAZY: dict[str, str] = {
    "AgentDiag": "otel_agentdiag.config",
    "AgentDiagOptions": "otel_agentdiag.config",
    "configure": "otel_agentdiag.config",
    "Budget": "otel_agentdiag.cost",
    "PriceTableError": "otel_agentdiag.cost",
    "SQLiteSpanExporter": "otel_agentdiag.exporters.sqlite",
    "LLMCall": "otel_agentdiag.instrumentation.manual",
    "agent": "otel_agentdiag.instrumentation.manual",
    "agent_run": "otel_agentdiag.instrumentation.manual",
    "iteration": "otel_agentdiag.instrumentation.manual",
    "llm_call": "otel_agentdiag.instrumentation.manual",
    "register_names": "otel_agentdiag.instrumentation.manual",
    "tool": "otel_agentdiag.instrumentation.manual",
    "tool_call": "otel_agentdiag.instrumentation.manual",
    "ForeignProcessor": "otel_agentdiag.pipeline.audit",
    "foreign_processors": "otel_agentdiag.pipeline.audit",
    "redacting_processor": "otel_agentdiag.redacting",
    "IdHasher": "otel_agentdiag.redaction",
    "Policy": "otel_agentdiag.redaction",
    "PolicyError": "otel_agentdiag.redaction",
    "RedactingSpanProcessor": "otel_agentdiag.redaction",
    "load_policy": "otel_agentdiag.redaction",
    "SpanStore": "otel_agentdiag.storage",
    "StoreError": "otel_agentdiag.storage",
}
"""Each public name (but ``__version__``) and the module it comes from."""

__all__ = [
    "AgentDiag",
    "AgentDiagOptions",
    "Budget",
    "ForeignProcessor",
    "IdHasher",
    "LLMCall",
    "Policy",
    "PolicyError",
    "PriceTableError",
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


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals(), __all__)

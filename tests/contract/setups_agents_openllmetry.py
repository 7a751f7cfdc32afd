"""The OpenAI Agents SDK, traced by OpenLLMetry's ``opentelemetry-instrumentation-openai-agents``, in an environment
of its own (``tests/envs/contract-agents-openllmetry.txt``; the app: ``apps/agents_openllmetry_app.py``)."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "OpenAI Agents SDK (OpenLLMetry)",
        ("openai-agents", "opentelemetry-instrumentation-openai-agents"),
        env="contract-agents-openllmetry",
        app="agents_openllmetry_app.py",
        truth=Truth(),
        short={
            "tokens": "the instrumentor reads usage from Responses API spans only: a chat-completions call has none",
            "cost": "the instrumentor records no usage for a chat-completions model call: nothing to price",
            "error": "the instrumentor records a failed tool as status text only: no exception event or type",
            "receipt": "the instrumentor records neither the run's group_id nor usage: no conversation, no tokens",
        },
    ),
)

"""CrewAI, traced by openinference-instrumentation-crewai with otel-agentdiag's OpenAIInstrumentor for the model
calls, in an environment of its own (``tests/envs/contract-crewai.txt``; the app: ``apps/crewai_app.py``)."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "CrewAI (OpenInference + our OpenAI instrumentor)",
        ("crewai", "openinference-instrumentation-crewai"),
        env="contract-crewai",
        app="crewai_app.py",
        truth=Truth(),
        short={},
    ),
)

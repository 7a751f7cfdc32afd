"""CrewAI, traced by otel-agentdiag's own CrewAIInstrumentor (CrewAI's event bus) with our OpenAIInstrumentor for the
HTTP side of the model calls, in an environment of its own (``tests/envs/contract-crewai.txt``; the app:
``apps/crewai_ours_app.py``). CrewAI has no conversation id: the run is filed in no session."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "CrewAI (ours)",
        ("crewai",),
        env="contract-crewai",
        app="crewai_ours_app.py",
        truth=Truth(session=False),
    ),
)

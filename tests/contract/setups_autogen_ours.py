"""AutoGen AgentChat, traced by otel-agentdiag's own instrumentor (with our OpenAI instrumentor on too), in an
environment of its own (``tests/envs/contract-autogen.txt``; the app: ``apps/autogen_ours_app.py``)."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "AutoGen AgentChat (ours)",
        ("autogen-agentchat",),
        env="contract-autogen",
        app="autogen_ours_app.py",
        truth=Truth(session=False),
    ),
)

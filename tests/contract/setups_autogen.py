"""AutoGen AgentChat, traced by openinference-instrumentation-autogen-agentchat plus autogen-core's own spans, in an
environment of its own (``tests/envs/contract-autogen.txt``; the app: ``apps/autogen_app.py``)."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "AutoGen AgentChat (OpenInference + autogen-core)",
        ("autogen-agentchat", "autogen-core", "openinference-instrumentation-autogen-agentchat"),
        env="contract-autogen",
        app="autogen_app.py",
        truth=Truth(),
        short={},
    ),
)

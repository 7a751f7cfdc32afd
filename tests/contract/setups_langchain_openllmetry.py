"""LangChain / LangGraph ``create_agent``, traced by OpenLLMetry's ``opentelemetry-instrumentation-langchain``, in an
environment of its own (``tests/envs/contract-langchain-openllmetry.txt``; the app:
``apps/langchain_openllmetry_app.py``)."""

from __future__ import annotations

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "LangChain / LangGraph create_agent (OpenLLMetry)",
        ("langchain", "langgraph", "opentelemetry-instrumentation-langchain"),
        env="contract-langchain-openllmetry",
        app="langchain_openllmetry_app.py",
        truth=Truth(),
        short={
            "names": "the agent span is named after the graph's run name, which a call may set: data",
            "error": "a tool error LangChain hands back to the model is recorded as a call that succeeded",
        },
    ),
)

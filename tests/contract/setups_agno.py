"""Agno traced by OpenInference's instrumentor, in an environment of its own."""

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "Agno (OpenInference)",
        ("agno", "openinference-instrumentation-agno"),
        env="contract-agno",
        app="agno_app.py",
        truth=Truth(),
        short={"error": "the instrumentor records a failed tool as status text only: no exception event or type"},
    ),
)

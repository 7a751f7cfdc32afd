"""Haystack 3's ``Agent``, traced by OpenInference's Haystack instrumentor (in ``tests/envs/contract-haystack.txt``)."""

from contract_checks import Truth
from contract_setups import Setup

_NO_TOOL_SPANS = "the instrumentor makes no tool spans: Haystack 3's Agent runs its tools outside any component"

SETUPS = (
    Setup(
        "Haystack Agent (OpenInference)",
        ("haystack-ai", "openinference-instrumentation-haystack"),
        env="contract-haystack",
        app="haystack_app.py",
        truth=Truth(agent=None),
        short={
            "tool_calls": _NO_TOOL_SPANS,
            "names": _NO_TOOL_SPANS,
            "error": _NO_TOOL_SPANS,
            "receipt": _NO_TOOL_SPANS,
        },
    ),
)

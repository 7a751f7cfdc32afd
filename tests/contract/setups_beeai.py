"""BeeAI Framework, traced by OpenInference's instrumentor (in ``tests/envs/contract-beeai.txt``)."""

from contract_checks import Truth
from contract_setups import Setup

_FINAL_ANSWER = "BeeAI runs its own final_answer tool on the model's text answer: a third tool call"

SETUPS = (
    Setup(
        "BeeAI (OpenInference)",
        ("beeai-framework", "openinference-instrumentation-beeai"),
        env="contract-beeai",
        app="beeai_app.py",
        truth=Truth(),
        short={"tool_calls": _FINAL_ANSWER, "names": _FINAL_ANSWER, "receipt": _FINAL_ANSWER},
    ),
)

"""BeeAI Framework, traced by OpenInference's instrumentor (in ``tests/envs/contract-beeai.txt``). BeeAI gives the
model's answer through a ``final_answer`` tool of its own: the adapter maps that span to a step (the run's answer),
so the run's tool calls are the agent's two."""

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "BeeAI (OpenInference)",
        ("beeai-framework", "openinference-instrumentation-beeai"),
        env="contract-beeai",
        app="beeai_app.py",
        truth=Truth(),
        short={},
    ),
)

"""Semantic Kernel traced by its own OpenTelemetry output, in an environment of its own. SK names a plugin's
function ``{plugin}-{function}`` (to the model and on its tool spans): the declared tool names are such."""

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "Semantic Kernel (its own output)",
        ("semantic-kernel",),
        env="contract-semantic-kernel",
        app="semantic_kernel_app.py",
        truth=Truth(tools=("Weather-get_weather", "Weather-lookup_city")),
        short={"receipt": "Semantic Kernel records no thread id on any span: the run has no conversation"},
    ),
)

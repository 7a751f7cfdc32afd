"""AG2 (``import autogen``) traced by its own OpenTelemetry instrumentation (with our OpenAI instrumentor, for the
tools the request offered), in an environment of its own. The conversation id is AG2's own (``chat_id``)."""

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "AG2 (its own instrumentation)",
        ("ag2",),
        env="contract-ag2",
        app="ag2_app.py",
        truth=Truth(),
    ),
)

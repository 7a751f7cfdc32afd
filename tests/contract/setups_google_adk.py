"""Google ADK traced by our instrumentor, in an environment of its own (``tests/envs/google_adk.txt``)."""

from contract_checks import Truth
from contract_setups import Setup

SETUPS = (
    Setup(
        "Google ADK (ours)",
        ("google-adk",),
        env="google_adk",
        app="google_adk_app.py",
        truth=Truth(),
    ),
)

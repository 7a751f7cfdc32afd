"""Strands Agents traced by our instrumentor, in an environment of its own (``tests/envs/strands.txt``)."""

from contract_checks import Truth
from contract_setups import Setup
from fakes import openai_server as fake

SETUPS = (
    Setup(
        "Strands Agents (ours)",
        ("strands-agents",),
        env="strands",
        app="strands_app.py",
        # Strands' OpenAIModel streams: the text answer is the streamed one, with the stream's usage.
        truth=Truth(
            tokens=(
                (fake.TOOL_CALL_USAGE.prompt_tokens, fake.TOOL_CALL_USAGE.completion_tokens),
                (fake.STREAM_USAGE.prompt_tokens, fake.STREAM_USAGE.completion_tokens),
            )
        ),
    ),
)

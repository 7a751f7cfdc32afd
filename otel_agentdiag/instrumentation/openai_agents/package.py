"""The ``openai-agents`` releases this instrumentation supports."""

_instruments = ("openai-agents >= 0.24",)
"""The ``openai-agents`` releases this instrumentation supports (the first with task and turn spans)."""

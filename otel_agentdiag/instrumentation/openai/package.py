"""The ``openai`` releases this instrumentation supports."""

_instruments = ("openai >= 1.40",)

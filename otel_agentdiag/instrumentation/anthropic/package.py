"""The ``anthropic`` releases this instrumentation supports."""

_instruments = ("anthropic >= 0.40",)

"""The ``google-adk`` releases this instrumentation supports."""

_instruments = ("google-adk >= 2.13",)
"""The ``google-adk`` releases this instrumentation supports (tested: 2.13.0; its schema-v2 GenAI spans and
``BaseLlmFlow._run_one_step_async``, one model call and its tool calls per call)."""

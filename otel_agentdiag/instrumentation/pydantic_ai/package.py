"""The ``pydantic-ai`` releases this instrumentation supports."""

_instruments = ("pydantic-ai-slim >= 2.68",)
"""The ``pydantic-ai-slim`` releases this instrumentation supports (tested: 2.68.0; its capability hooks
``wrap_node_run`` and ``Agent.instrument_all()`` with ``InstrumentationSettings``)."""

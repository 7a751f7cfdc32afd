"""The ``crewai`` releases this instrumentation supports."""

_instruments = ("crewai >= 1.15",)
"""The ``crewai`` releases this instrumentation supports (tested: 1.15.30; its event bus,
``crewai.events.event_bus.CrewAIEventsBus.emit``, and the scoped event ids it gives every event)."""

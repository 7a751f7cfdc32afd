"""The ``strands-agents`` releases this instrumentation supports."""

_instruments = ("strands-agents >= 1.62",)
"""The ``strands-agents`` releases this instrumentation supports (tested: 1.62.0; its public tracer,
``strands.telemetry.get_tracer()``, and its ``start_agent_span`` / ``start_event_loop_cycle_span`` methods)."""

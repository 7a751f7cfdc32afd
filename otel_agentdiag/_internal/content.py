"""The one switch instrumentation consults to capture content (``configure(capture_content=True)``).

Instrumentation calls :func:`capture` with the span a value belongs to; when no recorder is installed (the
default) that is one global read. The recorder (:class:`otel_agentdiag.content.recorder.ContentRecorder`)
snapshots the value at once, keeps it beside the span (never on it), and hands it to the local store's branch
only.
"""

from __future__ import annotations

from typing import Any, Protocol

from otel_agentdiag._internal.errors import log_internal_error


class ContentSink(Protocol):
    def record(self, span: Any, role: str, value: Any) -> None:
        """Snapshot ``value`` as ``span``'s content under ``role`` (a ``semconv.CONTENT_*`` name)."""


_sink: ContentSink | None = None


def enabled() -> bool:
    """Whether content is being captured: instrumentation may skip building a value when it is not."""
    return _sink is not None


def capture(span: Any, role: str, value: Any) -> None:
    """Record ``value`` as ``span``'s ``role`` content when capture is on. Never raises."""
    sink = _sink
    if sink is None:
        return
    try:
        sink.record(span, role, value)
    except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
        log_internal_error("capturing content", exc)


def install(sink: ContentSink) -> None:
    """Make ``sink`` the recorder every instrumentation captures into (the last ``configure()`` wins)."""
    global _sink
    _sink = sink


def uninstall(sink: ContentSink) -> None:
    """Stop capturing into ``sink`` (no-op when another recorder has replaced it)."""
    global _sink
    if _sink is sink:
        _sink = None

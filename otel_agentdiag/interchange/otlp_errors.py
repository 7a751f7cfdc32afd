"""Why OTLP-JSON input is refused: the reason codes of a rejected document, and the errors reading raises.

A reason is what a violation record stores (never the content of the document); see
:mod:`otel_agentdiag.interchange.otlp_json`.
"""

from __future__ import annotations

__all__ = [
    "CONTENT_REASONS",
    "INVALID_ID",
    "INVALID_SPAN",
    "INVALID_TIME",
    "LINE_REASONS",
    "LINE_TOO_LONG",
    "MALFORMED_JSON",
    "NOT_OTLP",
    "InvalidRequest",
    "MissingDependency",
]

MALFORMED_JSON = "malformed_json"
"""The line is not JSON (or not UTF-8)."""
NOT_OTLP = "not_otlp"
"""The line is JSON but not an ``ExportTraceServiceRequest`` (no ``resourceSpans`` list, wrong field types)."""
INVALID_ID = "invalid_id"
"""A trace, span, parent or link id is not lowercase hex of the right length, or is all zeros."""
INVALID_TIME = "invalid_time"
"""A span without a start time, ending before it starts, or an event without a time."""
INVALID_SPAN = "invalid_span"
"""A span kind or status code the OTLP specification does not define."""
LINE_TOO_LONG = "line_too_long"
"""The line is longer than :data:`MAX_LINE_BYTES`."""
LINE_REASONS = (MALFORMED_JSON, NOT_OTLP, INVALID_ID, INVALID_TIME, INVALID_SPAN, LINE_TOO_LONG)
"""Why a line of OTLP-JSON is rejected (the ``reason`` of a violation record)."""
CONTENT_REASONS = frozenset({INVALID_ID, INVALID_TIME, INVALID_SPAN})
"""The reasons that refuse an OTLP request for the content of a span (the document itself is OTLP)."""


class MissingDependency(RuntimeError):
    """The OpenTelemetry proto packages are not installed (``pip install -e '.[otlp]'`` in a checkout)."""


class InvalidRequest(ValueError):
    """A well-formed request whose content cannot be a span; ``reason`` is one of :data:`LINE_REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

"""What the viewer reads from the store: receipt verdicts for a page of runs, and one run with its health."""

from __future__ import annotations

from typing import Any

from otel_agentdiag.diagnostics.projection import strict_projection
from otel_agentdiag.diagnostics.receipt import receipts_of, session_receipt
from otel_agentdiag.diagnostics.status import project
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.serve.viewer_json import (
    ViewSpan,
    content_by_span,
    from_readable,
    from_stored,
    run_cost,
    spans_json,
)
from otel_agentdiag.storage import OVERFLOW_SESSION
from otel_agentdiag.storage.provenance import is_imported
from otel_agentdiag.storage.reading import ReadOnlyStore
from otel_agentdiag.storage.rows import StoredSpan

__all__ = ["page_receipts", "run_detail"]


def page_receipts(reader: ReadOnlyStore, sessions: set[str | None]) -> dict[str | None, str | None]:
    """Session -> its receipt's status; None for an imported session, and for every session while drops are filed
    under no session (the run page judges those with what it shows: provenance, unattributed drops)."""
    if not sessions:
        return {}
    if reader.session_stats(OVERFLOW_SESSION):
        return dict.fromkeys(sessions)
    judged = receipts_of(reader, [s for s in sessions if not is_imported(s)])
    return {s: (judged[s].status if s in judged else None) for s in sessions}


def _session_of(spans: list[StoredSpan]) -> str | None:
    """The session a trace belongs to: the largest session key among its spans (as the store lists traces)."""
    keys = [s.session for s in spans if s.session]
    return max(keys) if keys else None


def run_detail(reader: ReadOnlyStore, hasher: IdHasher | None, trace_id: str, *, local: bool) -> dict[str, Any] | None:
    """One run for the run page, None when the store has no span of ``trace_id``. A loopback client (``local``)
    gets the spans as stored and their captured content; any other the strict projection and never content."""
    stored = reader.get_trace(trace_id)
    if not stored:
        return None
    session = _session_of(stored)
    receipt = session_receipt(reader, session)
    # Every span of the trace is here: a parent missing from it is stored nowhere else in the trace.
    health = project(stored, receipt, session=session, as_of_ns=None, elsewhere={})
    omitted = 0
    if local:
        spans: list[ViewSpan] = [from_stored(s) for s in stored]
        captured = reader.trace_content(trace_id)
        content = content_by_span(captured) if captured else None
    else:
        projection = strict_projection(stored, hasher=hasher)
        spans = [from_readable(s) for s in projection.spans]
        omitted = projection.omitted
        content = None
    body = spans_json(spans, content)
    return {
        "trace_id": trace_id,
        "session": session,
        "view": "stored" if local else "strict_projection",
        "has_content": content is not None,
        "omitted_spans": omitted,
        **body,
        **run_cost(spans),
        "health": health.to_json(),
        "receipt": receipt.to_json(),
    }

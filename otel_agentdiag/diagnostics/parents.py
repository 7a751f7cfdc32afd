"""Missing parents: where a span's parent may be when it is not in its own session, and which are not anywhere.

A span names its parent by id. The parent can be in the same session, elsewhere in the store (the same trace,
another session), in another process (a remote caller), or nowhere: it never ended (the run of a process that
was killed), or it was lost. Receipts and status ask these questions of the rows; the answers must not be
given by spans this machine did not observe (see :mod:`otel_agentdiag.storage.provenance`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from otel_agentdiag import semconv as sc
from otel_agentdiag.storage import SpanStore, StoredSpan
from otel_agentdiag.storage.provenance import is_imported
from otel_agentdiag.storage.reading import ReadOnlyStore

__all__ = ["ENTRY_SPAN_KINDS", "spans_elsewhere", "unseen_parents"]

ENTRY_SPAN_KINDS = frozenset({"server", "consumer"})
"""Span kinds whose parent is in another process by definition (a request or a message that came in)."""


def spans_elsewhere(
    store: SpanStore | ReadOnlyStore, session: str | None, spans: Sequence[StoredSpan]
) -> dict[str, frozenset[str]]:
    """trace id -> span ids stored in that trace outside ``session``, for the traces where a span of
    ``spans`` names a parent that is not among them: where a missing parent may be after all. Reads only.

    For a session this machine observed only observed spans count: an imported span (a forged one with the
    ids of a parent that never ended, say) never explains a parent away.
    """
    ids = {(s.trace_id, s.span_id) for s in spans}
    traces = {s.trace_id for s in spans if s.parent_span_id is not None and (s.trace_id, s.parent_span_id) not in ids}
    any_provenance = is_imported(session)
    return {
        trace_id: frozenset(
            s.span_id for s in store.get_trace(trace_id) if s.session != session and (any_provenance or not s.imported)
        )
        for trace_id in traces
    }


def unseen_parents(spans: Sequence[StoredSpan], elsewhere: Mapping[str, frozenset[str]]) -> int:
    """Distinct parents that spans of a session name and that are stored nowhere in their trace (neither among
    ``spans`` nor in ``elsewhere``), named by a span that is not where an agent's work begins: not an agent run
    (its caller may be anywhere) and not an entry span (:data:`ENTRY_SPAN_KINDS`). Each is the top of work
    that was never seen to end: a run or iteration still open, killed, or lost. Pure."""
    ids = {(s.trace_id, s.span_id) for s in spans}
    missing: set[tuple[str, str]] = set()
    for span in spans:
        parent = span.parent_span_id
        if parent is None or (span.trace_id, parent) in ids:
            continue
        if parent in elsewhere.get(span.trace_id, frozenset()):
            continue
        if span.kind == sc.KIND_RUN or span.span_kind in ENTRY_SPAN_KINDS:
            continue
        missing.add((span.trace_id, parent))
    return len(missing)

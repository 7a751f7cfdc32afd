"""Integrity receipts read from the store: one session's, every session's, and the whole store's.

The verdict rules (statuses, reason codes, counts) are in :mod:`otel_agentdiag.diagnostics.verdict`; this
module reads what they judge from the store, consistently (a writer that commits meanwhile makes it read again),
and re-exports them. Every function here reads only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from otel_agentdiag.diagnostics.parents import spans_elsewhere
from otel_agentdiag.diagnostics.verdict import (
    COUNT_KEYS,
    DEGRADED,
    IMPORTED,
    INVALID,
    MIXED,
    PROVENANCES,
    QUARANTINED,
    REASONS,
    STATUSES,
    VALID,
    Receipt,
    ReceiptInput,
    combine,
    judge,
    nothing_to_judge,
    unattributed_of,
)
from otel_agentdiag.storage import OVERFLOW_SESSION, SessionStats, SessionSummary, SpanStore, StoredSpan

__all__ = [
    "COUNT_KEYS",
    "DEGRADED",
    "IMPORTED",
    "INVALID",
    "MIXED",
    "PROVENANCES",
    "QUARANTINED",
    "REASONS",
    "STATUSES",
    "VALID",
    "Overview",
    "Receipt",
    "ReceiptInput",
    "judge",
    "combine",
    "nothing_to_judge",
    "session_receipt",
    "session_receipts",
    "store_overview",
    "store_receipt",
]


# -- reading the store --------------------------------------------------------------------------------------
_READ_ATTEMPTS = 5


def _consistent(read: Callable[[], Any], fingerprint: Callable[[], Any]) -> Any:
    """``read()`` between two equal ``fingerprint()``s: a writer that commits in between makes us read again.

    Each read API call is its own snapshot; the ledger and the session bookkeeping change with every write,
    so equal fingerprints around the reads mean the rows were read from one state of the store.
    """
    result: Any = None
    for _ in range(_READ_ATTEMPTS):
        before = fingerprint()
        result = read()
        if fingerprint() == before:
            return result
    return result  # a store under constant writes: the last reading (a live session may show as in flux)


def _input_for(
    store: SpanStore,
    session: str | None,
    summary: SessionSummary | None,
    stats: Sequence[SessionStats],
    spans: Sequence[StoredSpan],
    violations: int,
    named_pruned: Callable[[], int],
    overflow: Sequence[SessionStats] = (),
) -> ReceiptInput:
    """``summary``: the session's entry of ``store.list_sessions()``; ``named_pruned()``: the pruned counts of
    every named session there, summed (asked only for the spans outside any session, when all were pruned);
    ``overflow``: the ledger rows of :data:`OVERFLOW_SESSION` (drops no session was charged with)."""
    outside = spans_elsewhere(store, session, spans)
    if summary is not None:
        pruned = summary.pruned_spans
    elif session is None and stats:
        # Spans outside any session, all pruned: the store lists no summary for them; their share of the
        # store's pruned count is what the named sessions do not account for.
        pruned = max(store.pruned_spans_total() - named_pruned(), 0)
    else:
        pruned = 0
    cleared_spans = summary.cleared_spans if summary is not None else 0
    cleared = summary is not None and (summary.cleared_at_ns is not None or summary.generation > 0)
    return ReceiptInput(
        session=session,
        spans=spans,
        stats=stats,
        pruned_spans=pruned,
        cleared_spans=cleared_spans,
        cleared=cleared,
        outside_span_ids=outside,
        violations=violations,
        unattributed=_unattributed(session, stats, spans, overflow),
    )


def _unattributed(
    session: str | None, stats: Sequence[SessionStats], spans: Sequence[StoredSpan], overflow: Sequence[SessionStats]
) -> dict[str, dict[str, int]]:
    """Observer -> cause -> its overflow drops, for the observers that may have filed this session's drops there:
    those with rows or ledger rows in the session, or any observer for a session the store knows nothing of."""
    if not overflow or session == OVERFLOW_SESSION:
        return {}
    observers = {row.observer for row in stats} | {span.observer or "" for span in spans}
    return unattributed_of(overflow, observers if observers else None)


def session_receipt(store: SpanStore, session: str | None) -> Receipt:
    """The receipt of one session (its digest; ``None`` = the spans outside any session). Reads only.

    Reads the session's own rows and bookkeeping (through the session index), not the whole store.
    """

    def fingerprint() -> tuple[Any, ...]:
        return (
            store.session_stats(session),
            store.session_stats(OVERFLOW_SESSION),
            store.session_summary(session),
            store.violation_counts().get(session, 0) if session is not None else 0,
        )

    def read() -> ReceiptInput:
        summary = store.session_summary(session)
        stats = store.session_stats(session)
        # Violations whose session is not known count against the store only (see store_receipt).
        violations = store.violation_counts().get(session, 0) if session is not None else 0
        spans = store.session_spans(session)
        overflow = store.session_stats(OVERFLOW_SESSION)
        return _input_for(store, session, summary, stats, spans, violations, store.named_pruned_spans, overflow)

    data: ReceiptInput = _consistent(read, fingerprint)
    return judge(data)


@dataclass(frozen=True)
class Overview:
    """Every session of the store and its receipt, from one consistent reading: what ``agentdiag sessions``
    lists and what the store's receipt combines, so the two cannot tell different stories."""

    sessions: list[tuple[SessionSummary | None, Receipt]]
    """Newest activity first (the no-session bucket as ``None``); the summary is None for a session known only
    from the ledger or a recorded violation."""
    malformed_rows: int
    violations: int
    """Violations the store recorded, whatever their session."""

    def receipt(self) -> Receipt:
        """The store's receipt: the sessions' receipts combined (see :func:`~.verdict.combine`)."""
        receipts = [receipt for _summary, receipt in self.sessions]
        return combine(receipts, malformed_rows=self.malformed_rows, violations=self.violations)


def store_overview(store: SpanStore, *, limit: int | None = None, since_ns: int | None = None) -> Overview:
    """Every session's summary and receipt, the store's malformed rows and violations, from one consistent
    reading. Reads only.

    A session known only from a recorded violation (none of its spans stored) gets a receipt too: ``invalid``.

    ``limit`` / ``since_ns`` (``agentdiag sessions --limit/--since``): only the sessions
    :meth:`~otel_agentdiag.storage.SpanStore.list_sessions` lists with them (none known only from the ledger or
    a violation), and only theirs are read and judged: the cost follows the page. ``malformed_rows`` then counts
    the malformed rows of those sessions only.

    The store's malformed rows are counted while every session's rows are decoded for its receipt (each row
    belongs to exactly one session key, the no-session bucket included), not by a second scan of the store.
    """
    paged = limit is not None or since_ns is not None

    def fingerprint() -> tuple[Any, ...]:
        return store.change_mark()

    def read() -> Overview:
        summaries = store.list_sessions(limit=limit, since_ns=since_ns)
        by_session = {s.session: s for s in summaries}
        violations = store.violation_counts()
        stats_by_session: dict[str | None, list[SessionStats]] = defaultdict(list)
        sessions: dict[str | None, None] = dict.fromkeys(by_session)
        if paged:
            for session in sessions:
                stats_by_session[session] = store.session_stats(session)
        else:
            for row in store.session_stats():
                stats_by_session[row.session or None].append(row)
            sessions.update(dict.fromkeys(stats_by_session))
            sessions.update(dict.fromkeys(s for s in violations if s is not None))
        named_pruned: list[int] = []

        def pruned_of_named() -> int:
            if not named_pruned:
                named_pruned.append(store.named_pruned_spans())
            return named_pruned[0]

        overflow = stats_by_session.get(OVERFLOW_SESSION) or store.session_stats(OVERFLOW_SESSION)
        found: list[tuple[SessionSummary | None, Receipt]] = []
        for session in sessions:
            spans = store.session_spans(session)
            data = _input_for(
                store,
                session,
                by_session.get(session),
                stats_by_session.get(session, []),
                spans,
                violations.get(session, 0) if session is not None else 0,
                pruned_of_named,
                overflow,
            )
            found.append((by_session.get(session), judge(data)))
        malformed = sum(receipt.counts.get("malformed_rows", 0) for _summary, receipt in found)
        return Overview(found, malformed, sum(violations.values()))

    result: Overview = _consistent(read, fingerprint)
    return result


def session_receipts(store: SpanStore) -> tuple[list[Receipt], int]:
    """Every session's receipt (newest activity first; the no-session bucket as ``None``) from one consistent
    reading, and the store's count of malformed rows. Reads only (see :func:`store_overview`)."""
    overview = store_overview(store)
    return [receipt for _summary, receipt in overview.sessions], overview.malformed_rows


def store_receipt(store: SpanStore) -> Receipt:
    """The receipt of the whole store: every session's counts summed, reasons joined. Reads only.

    A session with nothing left to judge (all its rows cleared or pruned) does not make the store invalid
    (:attr:`Receipt.not_judged` names it); the store is invalid when it holds no span at all, when a session is
    invalid for a reason code, or when the store recorded any violation (``ingest_violation``, whether or not its
    session is known).
    """
    return store_overview(store).receipt()

"""Integrity receipts read from the store: one session's, every session's, and the whole store's.

The verdict rules (statuses, reason codes, counts) are in :mod:`otel_agentdiag.diagnostics.verdict`; this
module reads what they judge from the store (:meth:`~otel_agentdiag.storage.SpanStore.receipt_records`: the same
SQL for one session as for all, in one snapshot) and re-exports them. Every function here reads only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

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
    combine_judged,
    judge,
    nothing_to_judge,
    unattributed_of,
)
from otel_agentdiag.storage import OVERFLOW_SESSION, SessionSummary, SpanStore
from otel_agentdiag.storage.provenance import is_imported
from otel_agentdiag.storage.reading import ReadOnlyStore
from otel_agentdiag.storage.receipt_reads import ReceiptRecords, ledger_row

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
    "receipts_of",
    "session_receipt",
    "session_receipts",
    "store_overview",
    "store_receipt",
]


def _input(records: ReceiptRecords, session: str | None) -> ReceiptInput:
    """The judge's input for ``session`` (None: the spans outside any session) from ``records``."""
    key = session or ""
    figures = records.figures.get(key, {})
    stats = [ledger_row(row) for row in records.ledger.get(key, ())]
    unattributed: dict[str, dict[str, int]] = {}
    if records.overflow and key != OVERFLOW_SESSION:
        # The observers that may have filed this session's drops under no session: those with rows or ledger
        # rows in it, or any observer for a session the store knows nothing of.
        observers = {row.observer for row in stats} | set(figures)
        unattributed = unattributed_of(records.overflow, observers if observers else None)
    pruned, cleared_spans, cleared = _deleted(records, key, bool(stats))
    return ReceiptInput(
        session=session,
        figures=figures,
        stats=stats,
        pruned_spans=pruned,
        cleared_spans=cleared_spans,
        cleared=cleared,
        missing=records.missing.get(key, ()),
        # Violations whose session is not known count against the store only (see store_receipt).
        violations=records.violations.get(key, 0) if key else 0,
        unattributed=unattributed,
    )


def _deleted(records: ReceiptRecords, key: str, has_ledger: bool) -> tuple[int, int, bool]:
    """(pruned spans, cleared spans, ever cleared) of a session, from its ``sessions`` row."""
    row = records.bookkeeping.get(key)
    # The no-session bucket's ``sessions`` row counts only while it has rows (see ``SpanStore.session_summary``).
    if row is not None and (key or row[5] is not None):
        _key, cleared_at, generation, pruned, cleared_spans, _first = row
        return int(pruned or 0), int(cleared_spans or 0), cleared_at is not None or int(generation or 0) > 0
    if not key and has_ledger:
        # Spans outside any session, all pruned: their share of the store's pruned count is what the named
        # sessions do not account for.
        return max(records.pruned_total - records.named_pruned, 0), 0, False
    return 0, 0, False


def _judged_all(records: ReceiptRecords, sessions: Iterable[str | None]) -> Iterator[tuple[str | None, Receipt, str]]:
    """Each session's receipt, judged once per distinct input: (session, its receipt, ''), or for a session whose
    input differs from an earlier one's only by its observer's name (the usual session: one observer and its
    ledger row, no missing parent, no drop filed under no session), (session, that earlier receipt, its observer):
    its own is that one with its session and ``observers == [observer]``."""
    memo: dict[tuple[Any, ...], Receipt] = {}
    overflow = {row.observer for row in records.overflow}
    figures_of, ledger_of, missing, violations = records.figures, records.ledger, records.missing, records.violations
    for session in sessions:
        key = session or ""
        figures, ledger = figures_of.get(key), ledger_of.get(key)
        if figures is None or ledger is None or len(figures) != 1 or len(ledger) != 1 or key in missing:
            yield session, judge(_input(records, session)), ""
            continue
        ((observer, found),) = figures.items()
        row = ledger[0]
        if row[1] != observer or not observer or observer in overflow:
            yield session, judge(_input(records, session)), ""
            continue
        count = violations.get(key, 0) if key else 0
        sig = (is_imported(session), key == OVERFLOW_SESSION, found, row[2:], _deleted(records, key, True), count)
        receipt = memo.get(sig)
        if receipt is None:
            memo[sig] = receipt = judge(_input(records, session))
            yield session, receipt, ""
        else:
            yield session, receipt, observer


def session_receipt(store: SpanStore | ReadOnlyStore, session: str | None) -> Receipt:
    """The receipt of one session (its digest; ``None`` = the spans outside any session). Reads only: a
    :class:`~otel_agentdiag.storage.reading.ReadOnlyStore` serves as well as a ``SpanStore``.

    Reads the session's own rows (through the receipt index) and bookkeeping, not the whole store.
    """
    return judge(_input(store.receipt_records([session]), session))


def receipts_of(store: SpanStore | ReadOnlyStore, sessions: Iterable[str | None]) -> dict[str | None, Receipt]:
    """The receipts of ``sessions`` (a page's), from one snapshot; each read as :func:`session_receipt` reads."""
    wanted = list(dict.fromkeys(sessions))
    records = store.receipt_records(wanted)
    return {session: judge(_input(records, session)) for session in wanted}


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
    """
    paged = limit is not None or since_ns is not None
    with store.snapshot():
        summaries = store.list_sessions(limit=limit, since_ns=since_ns)
        sessions: dict[str | None, None] = dict.fromkeys(s.session for s in summaries)
        records = store.receipt_records(list(sessions) if paged else None)
    if not paged:
        sessions.update(dict.fromkeys(_every_session(records)))
    by_session = {s.session: s for s in summaries}
    found = [
        (by_session.get(session), receipt if not like else replace(receipt, session=session, observers=[like]))
        for session, receipt, like in _judged_all(records, sessions)
    ]
    malformed = sum(receipt.counts["malformed_rows"] for _summary, receipt in found)
    return Overview(found, malformed, sum(records.violations.values()))


def _every_session(records: ReceiptRecords, *, ordered: bool = True) -> Iterator[str | None]:
    """The sessions a store's receipt judges besides those it lists: with a ``sessions`` row (the no-session
    bucket only while it has rows), with a ledger row (by key, '' first, when ``ordered``), or with a recorded
    violation."""
    for key, row in records.bookkeeping.items():
        if key or row[5] is not None:
            yield key or None
    for key in sorted(records.ledger) if ordered else records.ledger:  # by key: '' first
        yield key or None
    for key in records.violations:
        if key:
            yield key


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

    The same reading and judge as every session's receipt: the receipt SQL over the whole store, each session
    judged (once per distinct input: see :func:`_judged_all`), the receipts combined (:func:`~.verdict.combine`).
    """
    records = store.receipt_records()
    judged = _judged_all(records, dict.fromkeys(_every_session(records, ordered=False)))
    return combine_judged(judged, violations=sum(records.violations.values()))

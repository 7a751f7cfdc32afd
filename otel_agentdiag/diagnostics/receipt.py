"""Integrity receipts read from the store: one session's, every session's, and the whole store's.

The verdict rules (statuses, reason codes, counts) are in :mod:`otel_agentdiag.diagnostics.verdict`; this
module reads what they judge from the store, consistently (a writer that commits meanwhile makes it read again),
and re-exports them. Every function here reads only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_agentdiag.diagnostics.parents import spans_elsewhere
from otel_agentdiag.diagnostics.verdict import (
    PROVENANCES,
    REASONS,
    STATUSES,
    Receipt,
    ReceiptInput,
    combine,
    judge,
    nothing_to_judge,
    unattributed_of,
)
from otel_agentdiag.storage import OVERFLOW_SESSION, SessionStats, SessionSummary, SpanStore, StoredSpan
from otel_agentdiag.storage.provenance import OBSERVED
from otel_agentdiag.storage.reading import ReadOnlyStore
from otel_agentdiag.storage.receipt_rules import (
    COUNT_KEYS,
    DEGRADED,
    IMPORTED,
    INGEST_VIOLATION,
    INVALID,
    MIXED,
    QUARANTINED,
    VALID,
    FigureVerdict,
    contribution,
    judge_figures,
    nothing_reason,
    status_for,
)

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
    "overview_from_rows",
    "session_receipt",
    "session_receipts",
    "store_overview",
    "store_receipt",
    "store_receipt_from_rows",
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
    store: SpanStore | ReadOnlyStore,
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


def session_receipt(store: SpanStore | ReadOnlyStore, session: str | None) -> Receipt:
    """The receipt of one session (its digest; ``None`` = the spans outside any session). Reads only: a
    :class:`~otel_agentdiag.storage.reading.ReadOnlyStore` serves as well as a ``SpanStore``.

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
    a violation), and only theirs are judged: the cost follows the page. ``malformed_rows`` then counts the
    malformed rows of those sessions only.

    A settled session's receipt is the one the writer computed from its figures in its transaction (see
    :mod:`otel_agentdiag.storage.receipt_figures`): no span of it is read. The others (imported, with a parent
    that may be an unfinished span, ...) are judged from their rows, as is every session when the figures do not
    vouch for the store (rows written by other means): :func:`overview_from_rows`, to the same result.
    """
    paged = limit is not None or since_ns is not None

    def read() -> Overview | None:
        if store.receipt_figures() is None:
            return None
        summaries = store.list_sessions(limit=limit, since_ns=since_ns)
        by_session = {s.session: s for s in summaries}
        violations = store.violation_counts()
        sessions: dict[str | None, None] = dict.fromkeys(by_session)
        if not paged:
            sessions.update(dict.fromkeys(store.ledger_sessions()))
            sessions.update(dict.fromkeys(s for s in violations if s is not None))
        verdicts = store.receipt_verdicts(None if not paged else list(sessions))
        overflow = store.session_stats(OVERFLOW_SESSION)
        adjusted = _overflow_verdicts(store, overflow, verdicts)
        found: list[tuple[SessionSummary | None, Receipt]] = []
        for session in sessions:
            verdict = adjusted.get(session) or verdicts.get(session)
            if verdict is not None:
                receipt = _from_verdict(session, verdict)
            else:
                receipt = _judge_from_rows(store, session, violations, overflow)
            found.append((by_session.get(session), receipt))
        malformed = sum(receipt.counts.get("malformed_rows", 0) for _summary, receipt in found)
        return Overview(found, malformed, sum(violations.values()))

    result: Overview | None = _consistent(read, store.change_mark)
    if result is None:
        return overview_from_rows(store, limit=limit, since_ns=since_ns)
    return result


def _from_verdict(session: str | None, verdict: FigureVerdict) -> Receipt:
    return Receipt(
        verdict.status,
        list(verdict.reasons),
        dict(verdict.counts),
        list(verdict.observers),
        session,
        provenance=verdict.provenance,
        unattributed_drops=dict(verdict.unattributed_drops),
    )


def _as_verdict(receipt: Receipt) -> FigureVerdict:
    return FigureVerdict(
        receipt.status,
        list(receipt.reasons),
        dict(receipt.counts),
        list(receipt.observers),
        receipt.provenance,
        dict(receipt.unattributed_drops),
    )


def _judge_from_rows(
    store: SpanStore, session: str | None, violations: dict[str | None, int], overflow: Sequence[SessionStats]
) -> Receipt:
    """One session judged from its rows (what :func:`session_receipt` reads), inside a caller's reading."""
    summary = store.session_summary(session)
    stats = store.session_stats(session)
    spans = store.session_spans(session)
    count = violations.get(session, 0) if session is not None else 0
    data = _input_for(store, session, summary, stats, spans, count, store.named_pruned_spans, overflow)
    return judge(data)


def _overflow_verdicts(
    store: SpanStore,
    overflow: Sequence[SessionStats],
    verdicts: dict[str | None, FigureVerdict | None] | None = None,
) -> dict[str | None, FigureVerdict]:
    """Settled sessions whose receipt an overflow ledger row changes (an observer of theirs has one), judged from
    their figures with it: session -> verdict. ``verdicts``: the stored ones, when already read."""
    if not overflow:
        return {}
    observers = {row.observer for row in overflow}
    affected = store.sessions_of_observers(observers) - {OVERFLOW_SESSION}
    if verdicts is None:
        verdicts = store.receipt_verdicts(affected)
    settled = [session for session in affected if verdicts.get(session) is not None]
    out: dict[str | None, FigureVerdict] = {}
    for session, facts in store.receipt_facts(settled).items():
        mine = {row.observer for row in facts.stats} | {o for o, f in facts.figures.items() if f.n_rows}
        out[session] = judge_figures(facts, unattributed_of(overflow, mine))
    return out


def overview_from_rows(store: SpanStore, *, limit: int | None = None, since_ns: int | None = None) -> Overview:
    """:func:`store_overview` the reference way: every session's rows read and judged (:func:`~.verdict.judge`),
    whatever the receipt figures say. Reads only; what the figure-based path is tested against.

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


def settled_session_receipt(store: SpanStore | ReadOnlyStore, session: str | None) -> Receipt:
    """One session's receipt, from the verdict the writer settled for it when that is the whole story (no drop
    filed under no session: no overflow to share out), else judged from its rows (:func:`session_receipt`). For
    a reader that wants a page's receipts cheaply (the viewer's run page)."""
    if not store.session_stats(OVERFLOW_SESSION):
        verdict = store.receipt_verdicts([session]).get(session)
        if verdict is not None:
            return _from_verdict(session, verdict)
    return session_receipt(store, session)


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

    Read from the figures the writer keeps in its transaction (the settled sessions' receipts summed), plus the
    sessions only their rows can judge, judged from them, plus the settled sessions an overflow ledger row
    concerns, judged from their figures: no span of a settled session is read. When the figures do not vouch
    for the store (rows written by other means), every session is judged from its rows
    (:func:`store_receipt_from_rows`), to the same receipt.
    """

    def read() -> Receipt | None:
        figures = store.receipt_figures()
        if figures is None:
            return None
        totals: Counter[str] = Counter(figures.totals)
        not_judged = set(figures.not_judged)
        violations = store.violation_counts()
        overflow = store.session_stats(OVERFLOW_SESSION)
        adjusted = _overflow_verdicts(store, overflow)
        if adjusted:
            stored = store.receipt_verdicts(list(adjusted))
            for session, verdict in adjusted.items():
                before = stored.get(session)
                if before is not None:
                    totals.subtract(contribution(before))
                totals.update(contribution(verdict))
                key = session or ""
                not_judged.discard(key)
                if nothing_reason(verdict.counts, verdict.reasons) is not None:
                    not_judged.add(key)
        for key in figures.unsettled:
            receipt = _judge_from_rows(store, key or None, violations, overflow)
            totals.update(contribution(_as_verdict(receipt)))
            if nothing_to_judge(receipt) is not None:
                not_judged.add(key)
        return _from_totals(totals, sorted(not_judged), sum(violations.values()))

    result: Receipt | None = _consistent(read, store.change_mark)
    if result is None:
        return store_receipt_from_rows(store)
    return result


def store_receipt_from_rows(store: SpanStore) -> Receipt:
    """:func:`store_receipt` the reference way: every session judged from its rows, combined. Reads only."""
    return overview_from_rows(store).receipt()


def _from_totals(totals: Mapping[str, int], not_judged: Sequence[str], violations: int) -> Receipt:
    """The store receipt :func:`~.verdict.combine` gives, from the sessions' receipts summed (see
    :func:`~otel_agentdiag.storage.receipt_figures.contribution`)."""
    counts = {key: int(totals.get(f"count:{key}", 0)) for key in COUNT_KEYS}
    counts["ingest_violations"] = max(counts["ingest_violations"], violations)
    found = {name[len("reason:") :] for name, n in totals.items() if name.startswith("reason:") and n > 0}
    if counts["ingest_violations"]:
        found.add(INGEST_VIOLATION)
    reasons = sorted(found)
    observers = sorted(name[len("observer:") :] for name, n in totals.items() if name.startswith("observer:") and n > 0)
    status = status_for(reasons, spans=int(totals.get("judged_spans", 0)), malformed=counts["malformed_rows"])
    kinds = {name[len("provenance:") :] for name, n in totals.items() if name.startswith("provenance:") and n > 0}
    provenance = MIXED if len(kinds) > 1 or MIXED in kinds else (kinds.pop() if kinds else OBSERVED)
    return Receipt(
        status,
        reasons,
        counts,
        observers,
        None,
        scope="store",
        provenance=provenance,
        not_judged=tuple(key or None for key in not_judged),
    )

"""What a receipt reads of the rows, with SQL: per (session, observer) figures and the missing parents.

Migrations 13 and 14 made what these reads need. ``spans_session`` (session, start, observer, number, ``plain``)
makes the figures one GROUP BY per session that reads the index alone: ``plain`` is 1 on a row the writer vouches
counts plainly (numbered, no tombstone, no public-safety hit, well-formed JSON), so the figures of a session whose
rows are all plain and of one observer come from that GROUP BY alone. A session of several observers is grouped
again per observer (the same index, its entries only); any other session (rows written or changed by another
program, a tombstone, rows without a number: rare) is read again, its rows themselves. The ``orphan``
flag and its partial index ``spans_orphans`` mark the rows whose parent may be stored nowhere in their trace; only
those are checked against the key (an anti-join). The same SQL serves one session (``WHERE session IS ?``) and
the whole store. The rules that judge these figures are :func:`otel_agentdiag.diagnostics.verdict.judge`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from otel_agentdiag.storage.codec import bad_json, load_counts
from otel_agentdiag.storage.rows import ALL_SESSIONS, OVERFLOW_SESSION, SessionStats, _AllSessions

_IMPORTED = "'imported:'"
_NOT_IMPORTED = "(p.session IS NULL OR substr(p.session, 1, 9) <> 'imported:')"

_FIGURES = """SELECT session, MIN(observer), MAX(observer), COUNT(*), COUNT(plain), COUNT(DISTINCT sequence),
    MIN(sequence), MAX(sequence) FROM spans INDEXED BY spans_session {where} GROUP BY session"""
"""Per session: its lowest and highest observer, rows, plain rows, distinct numbers, the lowest and highest."""
_FIGURES_PER_OBSERVER = """SELECT observer, COUNT(*), COUNT(plain), COUNT(DISTINCT sequence), MIN(sequence),
    MAX(sequence) FROM spans INDEXED BY spans_session WHERE session IS ? GROUP BY observer"""
"""Per observer of one session, from the index alone: rows, plain rows, distinct numbers, the lowest and highest."""

_NUMBERED = "(typeof(sequence) = 'integer' AND sequence >= 0 AND observer <> '')"
"""A row whose number counts: an observer and an integer sequence number >= 0 (as a decoded row reads)."""
_SAFETY_PATH = "'$.\"agentdiag.redaction.public_safety_violation\"'"
_SAFETY = (
    f"(CASE WHEN json_valid(attributes) THEN (CASE WHEN json_type(attributes, {_SAFETY_PATH}) = 'integer'"
    f" THEN max(json_extract(attributes, {_SAFETY_PATH}), 0) ELSE 0 END) ELSE 0 END)"
)
"""SQL: the row's public-safety hits (a positive integer counter, else 0)."""
_MALFORMED = (
    f"({bad_json('attributes', 'object')} OR {bad_json('events', 'array')} OR {bad_json('links', 'array')}"
    f" OR (scope IS NOT NULL AND {bad_json('scope', 'object')}))"
)
"""SQL: a JSON column of the row does not decode to its type (as :func:`~.codec.decode_span` reads it)."""
PLAIN = (
    f"(CASE WHEN {_NUMBERED} AND name <> 'agentdiag.redaction_error' AND NOT {_MALFORMED} AND {_SAFETY} = 0 THEN 1 END)"
)
"""SQL: the ``plain`` flag of a row, from the row (what the writer sets; ``rebuild_summaries`` uses it)."""
_PER_OBSERVER = f"""SELECT coalesce(observer, ''), COUNT(*), TOTAL(name = 'agentdiag.redaction_error'),
    TOTAL({_NUMBERED}), COUNT(DISTINCT CASE WHEN {_NUMBERED} THEN sequence END),
    MIN(CASE WHEN {_NUMBERED} THEN sequence END), MAX(CASE WHEN {_NUMBERED} THEN sequence END),
    TOTAL(CASE WHEN plain IS NULL THEN {_SAFETY} ELSE 0 END),
    TOTAL(CASE WHEN plain IS NULL THEN {_MALFORMED} ELSE 0 END)
    FROM spans WHERE session IS ? GROUP BY coalesce(observer, '')"""
"""A session's figures from its rows themselves, per observer key."""

_MISSING = f"""SELECT coalesce(c.session, ''), c.trace_id, c.parent_span_id, coalesce(c.observer, ''), c.sequence,
    c.start_ns, c.span_id FROM spans c {{index}}
    WHERE {{where}} AND c.parent_span_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM spans p
        WHERE p.trace_id = c.trace_id AND p.span_id = c.parent_span_id
        AND (substr(coalesce(c.session, ''), 1, 9) = {_IMPORTED} OR {_NOT_IMPORTED}))"""
"""Rows ``{where}`` selects whose parent is stored nowhere in their trace (for an observed row: nowhere among
the observed rows; an imported span never explains a parent away)."""


class RowFigures(NamedTuple):
    """What a receipt needs of the rows of one (session, observer key: the rows' observer, ``''`` for none). A
    named tuple: a whole store's sessions make one each, and alike sessions are told apart by it."""

    rows: int
    tombstones: int = 0
    """Rows named ``agentdiag.redaction_error`` (a span the redactor failed on, stored in its place)."""
    numbered: int = 0
    """Rows with an observer and a sequence number >= 0."""
    distinct: int = 0
    """Distinct numbers among them."""
    low: int | None = None
    high: int | None = None
    """The lowest and highest number (None: no numbered row)."""
    safety: int = 0
    """The public-safety hits the rows' redactor counted, summed."""
    malformed: int = 0
    """Rows with a JSON column that does not decode to its type (they read back ``corrupt``)."""


@dataclass(frozen=True, slots=True)
class MissingParent:
    """A parent that rows of a session name and that is stored nowhere in its trace, by its first child (the
    lowest number, then the earliest start)."""

    observer: str
    """The child's observer ('' for none)."""
    sequence: int | None
    """The child's number (None: not an integer)."""
    numbers_below: int
    """Distinct numbers >= 0 of the child's observer in the session below the child's."""


def _where(session: str | _AllSessions | None) -> tuple[str, tuple[Any, ...]]:
    if isinstance(session, _AllSessions):
        return "", ()
    return "WHERE session IS ?", (session or None,)


def read_figures(
    conn: sqlite3.Connection, session: str | _AllSessions | None = ALL_SESSIONS
) -> dict[str, dict[str, RowFigures]]:
    """Session key ('' = no session) -> observer key -> the figures of its rows, for one session or all. One
    GROUP BY per session over ``spans_session`` (the index alone), again per observer for a session of several; a
    second read of its rows for a session with rows not all plain, and for the rows of a malformed resource."""
    where, args = _where(session)
    out: dict[str, dict[str, RowFigures]] = {}
    observers: list[str | None] = []
    again: set[str | None] = set()
    for key, first, last, n, plain, distinct, low, high in conn.execute(_FIGURES.format(where=where), args):
        if n != plain:
            again.add(key)
        elif first == last:  # every row numbered by one observer, nothing else to count
            out[key or ""] = {first: RowFigures(n, 0, n, distinct, low, high)}
        else:
            observers.append(key)
    for key in observers:  # every row plain, of several observers: their figures one by one
        figures: dict[str, RowFigures] = {}
        for observer, n, plain, distinct, low, high in conn.execute(_FIGURES_PER_OBSERVER, (key,)):
            if n != plain:
                again.add(key)
                break
            figures[observer] = RowFigures(n, 0, n, distinct, low, high)
        else:
            out[key or ""] = figures
    for key in again:
        out[key or ""] = {
            observer: RowFigures(int(n), int(tomb), int(numbered), distinct, low, high, int(safety), int(malformed))
            for observer, n, tomb, numbered, distinct, low, high, safety, malformed in conn.execute(
                _PER_OBSERVER, (key,)
            )
        }
    bad = [r[0] for r in conn.execute(f"SELECT id FROM resources WHERE {bad_json('attributes', 'object')}")]
    if bad:
        # Rows not counted malformed already (for their own JSON).
        marks = ",".join("?" * len(bad))
        clause = (
            f"{where} {'AND' if where else 'WHERE'} resource_id IN ({marks}) AND NOT (plain IS NULL AND {_MALFORMED})"
        )
        for key, observer, n in conn.execute(
            f"SELECT session, coalesce(observer, ''), COUNT(*) FROM spans {clause} GROUP BY 1, 2", (*args, *bad)
        ):
            found = out[key or ""][observer]
            out[key or ""][observer] = found._replace(malformed=found.malformed + int(n))
    return out


def _candidates(conn: sqlite3.Connection, session: str | _AllSessions | None) -> Iterator[tuple[Any, ...]]:
    """Rows whose parent is missing: among the flagged rows, and the rows of traces whose rows were deleted or
    changed by another program since a transaction of ours last looked (``summary_dirty``, usually empty)."""
    args: tuple[Any, ...] = ()
    where = "c.orphan IS NOT 0"
    if not isinstance(session, _AllSessions):
        where, args = "c.orphan IS NOT 0 AND c.session IS ?", (session or None,)
    yield from conn.execute(_MISSING.format(index="INDEXED BY spans_orphans", where=where), args)
    dirty = "c.trace_id IN (SELECT trace_id FROM summary_dirty) AND c.orphan IS 0"
    if conn.execute("SELECT 1 FROM summary_dirty LIMIT 1").fetchone() is not None:
        extra = "" if isinstance(session, _AllSessions) else " AND c.session IS ?"
        yield from conn.execute(_MISSING.format(index="", where=dirty + extra), args)


def read_missing(
    conn: sqlite3.Connection, session: str | _AllSessions | None = ALL_SESSIONS
) -> dict[str, list[MissingParent]]:
    """Session key -> the parents its rows name that are stored nowhere in their trace, for one session or all
    (sessions without any are absent)."""
    first: dict[tuple[str, str, str], tuple[tuple[int, int, str], str, Any]] = {}
    for key, trace_id, parent, observer, sequence, start, span_id in _candidates(conn, session):
        order = (sequence if type(sequence) is int else -1, int(start), str(span_id))
        at = (key, trace_id, parent)
        known = first.get(at)
        if known is None or order < known[0]:
            first[at] = (order, observer, sequence)
    out: dict[str, list[MissingParent]] = {}
    for (key, _trace_id, _parent), (_order, observer, sequence) in first.items():
        number = sequence if type(sequence) is int else None
        below = 0
        if observer and number is not None and number > 0:
            (below,) = conn.execute(
                "SELECT COUNT(DISTINCT sequence) FROM spans INDEXED BY spans_session WHERE session IS ?"
                " AND observer = ? AND sequence >= 0 AND sequence < ? AND typeof(sequence) = 'integer'",
                (key or None, observer, number),
            ).fetchone()
        out.setdefault(key, []).append(MissingParent(observer, number, int(below)))
    return out


@dataclass(frozen=True)
class ReceiptRecords:
    """Everything a receipt is judged from, for some sessions or all, read in one snapshot of the store."""

    figures: dict[str, dict[str, RowFigures]]
    """Session key ('' = no session) -> observer key -> the figures of its rows."""
    missing: dict[str, list[MissingParent]]
    ledger: dict[str, list[tuple[Any, ...]]]
    """Session key -> its ledger rows as stored, by observer: (session, observer, observed, accepted, stored,
    duplicates, rejected, dropped), the last two JSON (see :func:`ledger_row`)."""
    bookkeeping: dict[str, tuple[Any, ...]]
    """Session key -> its ``sessions`` row: (session, cleared_at_ns, generation, pruned_spans, cleared_spans,
    first_start_ns)."""
    violations: dict[str, int]
    """Session key ('' = not known) -> violations recorded."""
    overflow: list[SessionStats]
    """The ledger rows of :data:`~otel_agentdiag.storage.OVERFLOW_SESSION` (drops no session was charged with)."""
    pruned_total: int
    """Rows retention deleted from the whole store."""
    named_pruned: int
    """Of them, rows of named sessions (not the no-session bucket); read only with the no-session bucket."""


def ledger_row(row: Sequence[Any]) -> SessionStats:
    """A ledger row of :attr:`ReceiptRecords.ledger` as :class:`SessionStats`."""
    key, observer, observed, accepted, stored, duplicates, rejected, dropped = row
    return SessionStats(
        observer,
        key or None,
        int(observed or 0),
        int(accepted or 0),
        int(stored or 0),
        int(duplicates or 0),
        {} if rejected == "{}" else load_counts(rejected),
        {} if dropped == "{}" else load_counts(dropped),
    )


def _by_observer(row: Sequence[Any]) -> str:
    return str(row[1])


_LEDGER = "SELECT session, observer, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats"
_BOOKKEEPING = "SELECT session, cleared_at_ns, generation, pruned_spans, cleared_spans, first_start_ns FROM sessions"


def read_records(
    conn: sqlite3.Connection, sessions: Sequence[str | None] | _AllSessions = ALL_SESSIONS
) -> ReceiptRecords:
    """What :func:`~otel_agentdiag.diagnostics.verdict.judge` needs for ``sessions`` (or every session), with the
    same SQL for one session as for all. Call inside one read transaction (see ``SummaryReader.snapshot``)."""
    figures: dict[str, dict[str, RowFigures]] = {}
    missing: dict[str, list[MissingParent]] = {}
    ledger: dict[str, list[tuple[Any, ...]]] = {}
    bookkeeping: dict[str, tuple[Any, ...]] = {}
    if isinstance(sessions, _AllSessions):
        figures = read_figures(conn)
        missing = read_missing(conn)
        for row in conn.execute(_LEDGER):  # in the table's order: a sort of every row costs more than the read
            found = ledger.get(row[0])
            if found is None:
                ledger[row[0]] = [row]
            else:
                found.append(row)
        for rows in ledger.values():
            if len(rows) > 1:
                rows.sort(key=_by_observer)
        bookkeeping = {row[0]: row for row in conn.execute(_BOOKKEEPING)}
    else:
        for session in dict.fromkeys(sessions):
            key = session or ""
            figures.update(read_figures(conn, session))
            missing.update(read_missing(conn, session))
            rows = conn.execute(_LEDGER + " WHERE session = ? ORDER BY observer", (key,)).fetchall()
            if rows:
                ledger[key] = rows
            found = conn.execute(_BOOKKEEPING + " WHERE session = ?", (key,)).fetchone()
            if found is not None:
                bookkeeping[key] = found
    violations = {str(k): int(n) for k, n in conn.execute("SELECT session, COUNT(*) FROM violations GROUP BY session")}
    overflow = [
        ledger_row(row) for row in conn.execute(_LEDGER + " WHERE session = ? ORDER BY observer", (OVERFLOW_SESSION,))
    ]
    found_total = conn.execute("SELECT pruned_spans FROM store_stats WHERE id = 1").fetchone()
    named = 0
    if isinstance(sessions, _AllSessions) or None in sessions or "" in sessions:
        # Only the no-session bucket's receipt asks (a sum over every session: not for a page of named ones).
        (named,) = conn.execute("SELECT coalesce(SUM(pruned_spans), 0) FROM sessions WHERE session <> ''").fetchone()
    return ReceiptRecords(
        figures,
        missing,
        ledger,
        bookkeeping,
        violations,
        overflow,
        int(found_total[0]) if found_total is not None else 0,
        int(named),
    )

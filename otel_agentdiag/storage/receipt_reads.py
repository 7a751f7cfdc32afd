"""Reads of the receipt figures: what the writer settles from, what whole-store receipts read instead of spans.

See :mod:`otel_agentdiag.storage.receipt_figures` for the tables and when they vouch for the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_agentdiag.storage.codec import load_counts
from otel_agentdiag.storage.receipt_rules import (
    Figure,
    FigureVerdict,
    SessionFacts,
    load_ranges,
    stored_verdict,
)
from otel_agentdiag.storage.rows import (
    SessionStats,
)


def chunks(items: Sequence[Any], size: int = 400) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _by_observer(row: SessionStats) -> str:
    return row.observer


def load_facts(
    conn: sqlite3.Connection, keys: Sequence[str], written: Mapping[str, dict[str, Figure]] | None = None
) -> dict[str, tuple[SessionFacts, bool, bool]]:
    """key -> (facts, listed: has a ``sessions`` row the reader lists, known: the receipt lists the session).
    ``written``: figures of some of the sessions as the transaction under way wrote them (not read again)."""
    cached = written or {}
    figures: dict[str, dict[str, Figure]] = {k: cached.get(k, {}) for k in keys}
    for chunk in chunks([k for k in keys if k not in cached]):
        for session, observer, n, tomb, numbered, ranges, safety, malformed in conn.execute(
            "SELECT session, observer, n_rows, tombstones, numbered, ranges, safety, malformed FROM receipt_figures"
            f" WHERE session IN ({','.join('?' * len(chunk))})",
            list(chunk),
        ):
            figures[session][observer] = Figure(
                int(n), int(tomb), int(numbered), load_ranges(ranges), int(safety), int(malformed)
            )
    stats: dict[str, list[SessionStats]] = {k: [] for k in keys}
    rows: dict[str, tuple[Any, ...]] = {}
    violations: dict[str, int] = {}
    missing: dict[str, list[tuple[str, int]]] = {k: [] for k in keys}
    # Both tables are usually empty: one probe each instead of a lookup per key.
    any_violations = conn.execute("SELECT 1 FROM violations LIMIT 1").fetchone() is not None
    any_missing = conn.execute("SELECT 1 FROM receipt_missing LIMIT 1").fetchone() is not None
    for chunk in chunks(keys):
        marks = ",".join("?" * len(chunk))
        args = list(chunk)
        for observer, session, observed, accepted, stored, duplicates, rejected, dropped in conn.execute(
            "SELECT observer, session, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats"
            f" WHERE session IN ({marks})",  # ordered below (an ORDER BY here costs a sort per batch)
            args,
        ):
            stats[session].append(
                SessionStats(
                    observer,
                    session or None,
                    int(observed or 0),
                    int(accepted or 0),
                    int(stored or 0),
                    int(duplicates or 0),
                    {} if rejected == "{}" else load_counts(rejected),
                    {} if dropped == "{}" else load_counts(dropped),
                )
            )
        for row in conn.execute(
            "SELECT session, first_start_ns, cleared_at_ns, generation, pruned_spans, cleared_spans FROM sessions"
            f" WHERE session IN ({marks})",
            args,
        ):
            rows[row[0]] = row
        if any_violations:
            for session, n in conn.execute(
                f"SELECT session, COUNT(*) FROM violations WHERE session IN ({marks}) GROUP BY session", args
            ):
                violations[session] = int(n)
        if any_missing:
            for session, observer, sequence in conn.execute(
                f"SELECT session, observer, sequence FROM receipt_missing WHERE session IN ({marks})", args
            ):
                missing[session].append((observer, int(sequence)))
    for found in stats.values():
        if len(found) > 1:
            found.sort(key=_by_observer)
    out: dict[str, tuple[SessionFacts, bool, bool]] = {}
    for key in keys:
        row = rows.get(key)
        listed = row is not None and (bool(key) or row[1] is not None)
        known = listed or bool(stats[key]) or (bool(key) and key in violations)
        facts = SessionFacts(
            key=key,
            figures=figures[key],
            stats=stats[key],
            pruned_spans=int(row[4] or 0) if listed and row is not None else 0,
            cleared_spans=int(row[5] or 0) if listed and row is not None else 0,
            cleared=listed and row is not None and (row[2] is not None or int(row[3] or 0) > 0),
            violations=violations.get(key, 0) if key else 0,
            missing=missing[key],
        )
        out[key] = (facts, listed, known)
    return out


# -- readers --------------------------------------------------------------------------------------------------
def figures_vouch(conn: sqlite3.Connection) -> bool:
    """Whether the figures account for every row and every ledger, bookkeeping and violation change (nothing
    written by other means since the last settle). O(1)."""
    try:
        found = conn.execute("SELECT watermark FROM receipt_state WHERE id = 1").fetchone()
    except sqlite3.OperationalError:
        return False
    if found is None:
        return False
    (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM spans").fetchone()
    if int(top) != int(found[0]):
        return False
    for table in ("receipt_touched", "receipt_stale", "summary_dirty"):
        if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None:
            return False
    return True


@dataclass(frozen=True)
class StoreFigures:
    """The settled sessions' receipts summed, and the sessions only their rows can judge."""

    totals: dict[str, int]
    unsettled: list[str]
    """Session keys ('' = no session)."""
    not_judged: list[str]
    """Settled sessions with nothing to judge."""


def read_store_figures(conn: sqlite3.Connection) -> StoreFigures:
    totals = {str(k): int(v) for k, v in conn.execute("SELECT key, value FROM receipt_totals")}
    unsettled = [
        str(r[0])
        for r in conn.execute(
            "SELECT session FROM receipt_sessions INDEXED BY receipt_sessions_unsettled WHERE settled = 0"
        )
    ]
    not_judged = [
        str(r[0])
        for r in conn.execute(
            "SELECT session FROM receipt_sessions INDEXED BY receipt_sessions_unjudged"
            " WHERE unjudged IS NOT NULL AND settled = 1"
        )
    ]
    return StoreFigures(totals, unsettled, not_judged)


def read_session_verdicts(conn: sqlite3.Connection, keys: Sequence[str] | None) -> dict[str, FigureVerdict | None]:
    """key -> the stored verdict of a settled session, None for an unsettled one (absent: not a session the
    receipt lists). ``keys`` None: every session."""
    out: dict[str, FigureVerdict | None] = {}
    sql = "SELECT session, settled, status, reasons, counts, observers FROM receipt_sessions"
    batches: Iterable[Sequence[str] | None] = [None] if keys is None else chunks(list(keys))
    for chunk in batches:
        if chunk is None:
            cursor = conn.execute(sql)
        else:
            cursor = conn.execute(sql + f" WHERE session IN ({','.join('?' * len(chunk))})", list(chunk))
        for row in cursor:
            out[str(row[0])] = stored_verdict(row[2:]) if row[1] else None
    return out


def read_facts(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, SessionFacts]:
    """The facts :func:`judge_figures` needs for settled sessions ``keys`` (to judge them with an overflow row)."""
    return {key: facts for key, (facts, _listed, _known) in load_facts(conn, list(keys)).items()}


def sessions_of_observers(conn: sqlite3.Connection, observers: Sequence[str]) -> set[str]:
    """Session keys in which any of ``observers`` has rows or ledger rows (the figures are scanned: no index on
    their observer, which only a store with an overflow ledger row needs)."""
    found: set[str] = set()
    for chunk in chunks(list(observers)):
        marks = ",".join("?" * len(chunk))
        found.update(
            r[0] for r in conn.execute(f"SELECT session FROM session_stats WHERE observer IN ({marks})", list(chunk))
        )
        found.update(
            r[0] for r in conn.execute(f"SELECT session FROM receipt_figures WHERE observer IN ({marks})", list(chunk))
        )
    return found


def has_tables(conn: sqlite3.Connection) -> bool:
    """Whether the store has migration 10's tables."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipt_state'").fetchone()
    return found is not None

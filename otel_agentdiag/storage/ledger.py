"""The accounting ledger: per (observer, session) tallies, their upserts and reads, and the observers table."""

from __future__ import annotations

import sqlite3
from typing import Any

from otel_agentdiag.storage.codec import canonical_json, load_counts
from otel_agentdiag.storage.migrations import StoreError
from otel_agentdiag.storage.rows import Accounting, ObserverInfo, SessionStats, _AllSessions


class Tally:
    """Deltas for one (observer, session) row of ``session_stats`` within one transaction."""

    __slots__ = ("accepted", "dropped", "duplicates", "observed", "rejected", "stored")

    def __init__(self) -> None:
        self.observed = self.accepted = self.stored = self.duplicates = 0
        self.rejected: dict[str, int] = {}
        self.dropped: dict[str, int] = {}

    def add_rejected(self, reason: str, n: int) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + n

    def add_dropped(self, cause: str, n: int) -> None:
        self.dropped[cause] = self.dropped.get(cause, 0) + n


def add_accounting(tallies: dict[tuple[str, str], Tally], accounting: Accounting) -> None:
    """Add the accounting's rejected/dropped deltas (each also ``observed``); non-positive counts are ignored."""
    for deltas, rejected in ((accounting.rejected, True), (accounting.dropped, False)):
        for session, counts in deltas.items():
            key = (accounting.observer, session or "")
            for reason, n in counts.items():
                if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                    continue
                tally = tallies.get(key)
                if tally is None:
                    tally = tallies[key] = Tally()
                tally.observed += n
                if rejected:
                    tally.add_rejected(str(reason), n)
                else:
                    tally.add_dropped(str(reason), n)


def merge_counts(base: dict[str, int], delta: dict[str, int]) -> dict[str, int]:
    out = dict(base)
    for key, n in delta.items():
        out[key] = out.get(key, 0) + n
    return out


def upsert_stats(conn: sqlite3.Connection, tallies: dict[tuple[str, str], Tally]) -> None:
    """Add each tally to its ``session_stats`` row (created when missing)."""
    plain: list[tuple[str, str, int, int, int, int]] = []  # rows with no rejections or drops: one executemany
    for (observer, session), t in tallies.items():
        if t.rejected or t.dropped:
            found = conn.execute(
                "SELECT rejected, dropped FROM session_stats WHERE observer = ? AND session = ?",
                (observer, session),
            ).fetchone()
            rejected = merge_counts(load_counts(found[0]) if found else {}, t.rejected)
            dropped = merge_counts(load_counts(found[1]) if found else {}, t.dropped)
            conn.execute(
                "INSERT INTO session_stats (observer, session, observed, accepted, stored, duplicates,"
                " rejected, dropped) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (observer, session) DO UPDATE SET observed = observed + excluded.observed,"
                " accepted = accepted + excluded.accepted, stored = stored + excluded.stored,"
                " duplicates = duplicates + excluded.duplicates, rejected = excluded.rejected,"
                " dropped = excluded.dropped",
                (
                    observer,
                    session,
                    t.observed,
                    t.accepted,
                    t.stored,
                    t.duplicates,
                    canonical_json(rejected),
                    canonical_json(dropped),
                ),
            )
        else:
            plain.append((observer, session, t.observed, t.accepted, t.stored, t.duplicates))
    if plain:
        conn.executemany(
            "INSERT INTO session_stats (observer, session, observed, accepted, stored, duplicates)"
            " VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (observer, session) DO UPDATE SET observed = observed + excluded.observed,"
            " accepted = accepted + excluded.accepted, stored = stored + excluded.stored,"
            " duplicates = duplicates + excluded.duplicates",
            plain,
        )


def upsert_observers(
    conn: sqlite3.Connection, accounting: Accounting | None, seen: set[str], now: int, *, imported: bool = False
) -> None:
    """Record the accounting's observer values and the last sighting of each observer in ``seen``; with
    ``imported``, raise :class:`StoreError` when one of them was recorded as observed."""
    if imported:
        names = sorted(seen | ({accounting.observer} if accounting is not None and accounting.observer else set()))
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            if conn.execute(
                f"SELECT 1 FROM observers WHERE imported = 0 AND observer IN ({','.join('?' * len(chunk))}) LIMIT 1",
                chunk,
            ).fetchone():
                raise StoreError("imported spans name an observer this store recorded as observed; none written")
    flag = 1 if imported else 0
    if accounting is not None and accounting.observer:
        conn.execute(
            "INSERT INTO observers (observer, pid, started_ns, last_seen_ns, peak_queue, queue_limit,"
            f" flush_attempts, flush_failures, imported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {flag})"
            " ON CONFLICT (observer) DO UPDATE SET pid = excluded.pid, started_ns = excluded.started_ns,"
            " last_seen_ns = excluded.last_seen_ns, peak_queue = excluded.peak_queue,"
            " queue_limit = excluded.queue_limit, flush_attempts = excluded.flush_attempts,"
            " flush_failures = excluded.flush_failures",
            (
                accounting.observer,
                accounting.pid,
                accounting.started_ns,
                now,
                accounting.peak_queue,
                accounting.queue_limit,
                accounting.flush_attempts,
                accounting.flush_failures,
            ),
        )
        seen = seen - {accounting.observer}
    for observer in seen:
        conn.execute(
            f"INSERT INTO observers (observer, last_seen_ns, imported) VALUES (?, ?, {flag})"
            " ON CONFLICT (observer) DO UPDATE SET last_seen_ns = excluded.last_seen_ns"
            # at most once a second: an unchanged row dirties no page
            " WHERE excluded.last_seen_ns >= coalesce(last_seen_ns, 0) + 1000000000",
            (observer, now),
        )


def store_totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(span_count, total_bytes)`` of the running totals (recomputed if their row is missing)."""
    found = conn.execute("SELECT span_count, total_bytes FROM store_stats WHERE id = 1").fetchone()
    if found is None:
        found = conn.execute("SELECT COUNT(*), coalesce(SUM(size), 0) FROM spans").fetchone()
        conn.execute("INSERT INTO store_stats (id, span_count, total_bytes) VALUES (1, ?, ?)", (found[0], found[1]))
    return int(found[0]), int(found[1])


def read_session_stats(conn: sqlite3.Connection, session: str | _AllSessions | None) -> list[SessionStats]:
    """Cumulative stats rows, of one session (None: outside any session) or of all (the default)."""
    sql = "SELECT observer, session, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats"
    args: tuple[Any, ...] = ()
    if not isinstance(session, _AllSessions):
        sql += " WHERE session = ?"
        args = (session or "",)
    rows = conn.execute(sql + " ORDER BY session, observer", args).fetchall()
    return [
        SessionStats(
            observer=observer,
            session=sess or None,
            observed=int(observed or 0),
            accepted=int(accepted or 0),
            stored=int(stored or 0),
            duplicates=int(duplicates or 0),
            rejected=load_counts(rejected),
            dropped=load_counts(dropped),
        )
        for observer, sess, observed, accepted, stored, duplicates, rejected, dropped in rows
    ]


def read_observers(conn: sqlite3.Connection) -> list[ObserverInfo]:
    """Every observer that wrote rows or accounting, oldest start first."""
    rows = conn.execute(
        "SELECT observer, pid, started_ns, last_seen_ns, peak_queue, queue_limit, flush_attempts,"
        " flush_failures, imported FROM observers ORDER BY coalesce(started_ns, 0), observer"
    ).fetchall()
    return [
        ObserverInfo(
            observer=row[0],
            pid=row[1],
            started_ns=row[2],
            last_seen_ns=row[3],
            peak_queue=int(row[4] or 0),
            queue_limit=int(row[5] or 0),
            flush_attempts=int(row[6] or 0),
            flush_failures=int(row[7] or 0),
            imported=bool(row[8]),
        )
        for row in rows
    ]

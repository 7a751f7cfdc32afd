"""Deleting on request: clearing a session, pruning to the retention limits, scrubbing freed bytes from the files."""

from __future__ import annotations

import sqlite3
import time

from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.ledger import store_totals
from otel_agentdiag.storage.migrations import StoreError
from otel_agentdiag.storage.retention import Pruned, prune_by_age, prune_session, prune_store
from otel_agentdiag.storage.rows import PruneResult
from otel_agentdiag.storage.scrub import ScrubIncomplete, ScrubReport
from otel_agentdiag.storage.scrub import scrub as scrub_files
from otel_agentdiag.storage.summaries import flush_deleted


class StoreMaintenance(StoreConnection):
    """The deleting side of ``SpanStore``: :meth:`clear_session`, :meth:`prune` and :meth:`scrub`."""

    def clear_session(self, session_digest: str, *, now_ns: int | None = None, scrub: bool = True) -> int:
        """Delete the session's spans, their captured content and push marks (not its stats), advance its
        generation gate, then (``scrub``, the default) rewrite the files; returns spans deleted.

        Spans of the session that started at or before ``now_ns`` and arrive later are not written (counted
        ``dropped["cleared"]`` for their observer). The session's digest stays in the gate (``sessions``) and in
        its ledger rows (``session_stats``), so receipts still account for what was observed.

        With ``scrub`` (see :meth:`scrub`), a return means no byte of a deleted span or its content is left in
        the database, its ``-wal`` or ``-shm``. When that cannot be made to hold (another connection holds a read
        transaction open, say), :class:`~otel_agentdiag.storage.scrub.ScrubIncomplete` is raised AFTER the delete
        was committed (its ``deleted`` is the count); the same call again, once that reader is gone, finishes it.
        ``scrub=False`` only deletes (freed space is zeroed, but copies can remain until a :meth:`scrub`): for
        clearing several sessions and scrubbing once. Raises ``sqlite3.Error`` with nothing changed.
        """
        if not isinstance(session_digest, str) or not session_digest:
            raise StoreError("clear_session needs a session digest")
        now = time.time_ns() if now_ns is None else now_ns
        with self._transaction() as conn:
            count, size = conn.execute(
                "SELECT COUNT(*), coalesce(SUM(size), 0) FROM spans WHERE session = ?", (session_digest,)
            ).fetchone()
            conn.execute(
                "DELETE FROM push_marks WHERE EXISTS (SELECT 1 FROM spans s WHERE s.session = ?"
                " AND s.trace_id = push_marks.trace_id AND s.span_id = push_marks.span_id)",
                (session_digest,),
            )
            conn.execute("DELETE FROM spans WHERE session = ?", (session_digest,))
            conn.execute(
                "INSERT INTO sessions (session, cleared_at_ns, generation, cleared_spans) VALUES (?, ?, 1, ?)"
                " ON CONFLICT (session) DO UPDATE SET"
                " cleared_at_ns = max(coalesce(cleared_at_ns, excluded.cleared_at_ns), excluded.cleared_at_ns),"
                " generation = generation + 1, cleared_spans = cleared_spans + excluded.cleared_spans,"
                " span_count = 0, bytes = 0",
                (session_digest, now, count),
            )
            store_totals(self._conn)
            conn.execute(
                "UPDATE store_stats SET span_count = span_count - ?, total_bytes = total_bytes - ? WHERE id = 1",
                (count, size),
            )
            flush_deleted(conn)
        if scrub:
            report = self.scrub()
            if not report.complete:
                raise ScrubIncomplete(report, deleted=int(count))
        return int(count)

    def scrub(self) -> ScrubReport:
        """Rewrite the file from its live rows (``VACUUM``) and reset its WAL (``wal_checkpoint(TRUNCATE)``), so
        that no byte of a row deleted before (cleared, pruned, by this or an earlier version) is left in the
        database, its ``-wal`` or ``-shm``; see :mod:`otel_agentdiag.storage.scrub` for how and its limits.

        Never raises for a busy, full or damaged store: the report's ``complete`` is False and says why (other
        connections are waited for up to the busy timeout). Raises :class:`StoreError` when the file is gone.
        """
        with self._lock:
            self._check_file()
            # Marked clean before the rewrite: a delete committed meanwhile marks it again (its own transaction).
            self._mark_scrubbed(0)
            report = scrub_files(self._conn, self.path)
            if not report.complete:
                self._mark_scrubbed(1)
            return report

    def _mark_scrubbed(self, deleted: int) -> None:
        if self.read_only or self._conn.in_transaction:
            return
        try:
            self._conn.execute("UPDATE store_stats SET deleted_since_scrub = ? WHERE id = 1", (deleted,))
        except sqlite3.Error:
            pass  # the mark only saves work: a store that cannot take it is scrubbed every time

    def needs_scrub(self) -> bool:
        """Whether a row may have been deleted (cleared, pruned, by retention, by this or an earlier version, or
        by another program: every delete of a span is noted by a trigger) since the last complete
        :meth:`scrub`. False means a scrub now would find no deleted span's bytes to remove. O(1)."""
        with self._lock:
            found = self._conn.execute("SELECT deleted_since_scrub FROM store_stats WHERE id = 1").fetchone()
            dirty = self._conn.execute("SELECT 1 FROM summary_dirty LIMIT 1").fetchone()
        return found is None or bool(found[0]) or dirty is not None

    def prune(self, *, now_ns: int | None = None) -> PruneResult:
        """Apply every retention limit to every session and the store now; returns what was deleted.

        The limits are applied from the running totals the writer keeps (rows and bytes per session and per
        store); when those disagree with the rows (see :func:`_totals_drifted`: written by another program, say)
        they are recomputed from the rows first. Also forgets the push marks of spans no longer stored. What is
        deleted is zeroed where SQLite frees it; call :meth:`scrub` after it for no byte of a pruned span to be
        left (copies of moved cells remain otherwise: see :mod:`otel_agentdiag.storage.scrub`). Raises
        ``sqlite3.Error`` with nothing changed.
        """
        now = time.time_ns() if now_ns is None else now_ns
        limits = self.retention
        with self._transaction() as conn:
            if _totals_drifted(conn):
                _recount_totals(conn)
            total = Pruned()
            for entry in prune_by_age(conn, limits, now).values():
                total.add(entry)
            conditions, args = [], []
            if limits.max_session_spans is not None:
                conditions.append("span_count > ?")
                args.append(limits.max_session_spans)
            if limits.max_session_bytes is not None:
                conditions.append("bytes > ?")
                args.append(limits.max_session_bytes)
            if conditions:
                over = conn.execute(
                    f"SELECT session, span_count, bytes FROM sessions WHERE {' OR '.join(conditions)}", args
                ).fetchall()
                for session, count, size in over:
                    for entry in prune_session(conn, limits, session, count, size).values():
                        total.add(entry)
            for entry in prune_store(conn, limits, store_totals(self._conn)[1]).values():
                total.add(entry)
            conn.execute(
                "DELETE FROM push_marks WHERE NOT EXISTS (SELECT 1 FROM spans s"
                " WHERE s.trace_id = push_marks.trace_id AND s.span_id = push_marks.span_id)"
            )
            flush_deleted(conn)
        return PruneResult(spans=total.spans, bytes=total.bytes)


def _totals_drifted(conn: sqlite3.Connection) -> bool:
    """Whether the running totals may disagree with the rows, by checks that read no span row: the store's row
    count against the spans table's count (SQLite counts the entries of its smallest b-tree), and the store's
    totals against the sum of the sessions' totals (one row per session)."""
    found = conn.execute("SELECT span_count, total_bytes FROM store_stats WHERE id = 1").fetchone()
    if found is None:
        return True
    (rows,) = conn.execute("SELECT COUNT(*) FROM spans").fetchone()
    if int(found[0]) != int(rows):
        return True
    count, size = conn.execute("SELECT coalesce(SUM(span_count), 0), coalesce(SUM(bytes), 0) FROM sessions").fetchone()
    return (int(count), int(size)) != (int(found[0]), int(found[1]))


def _recount_totals(conn: sqlite3.Connection) -> None:
    """Recompute the running totals (rows and bytes per session and per store) from the rows: a whole-table
    aggregate, for totals :func:`_totals_drifted` found wrong."""
    conn.execute("UPDATE sessions SET span_count = 0, bytes = 0")
    conn.execute(
        "INSERT INTO sessions (session, span_count, bytes)"
        " SELECT coalesce(session, ''), COUNT(*), SUM(size) FROM spans WHERE true"
        " GROUP BY coalesce(session, '')"
        " ON CONFLICT (session) DO UPDATE SET span_count = excluded.span_count, bytes = excluded.bytes"
    )
    conn.execute(
        "INSERT INTO store_stats (id, span_count, total_bytes)"
        " SELECT 1, COUNT(*), coalesce(SUM(size), 0) FROM spans WHERE true"
        " ON CONFLICT (id) DO UPDATE SET span_count = excluded.span_count,"
        " total_bytes = excluded.total_bytes"
    )

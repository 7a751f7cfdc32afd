"""Read queries over the store with typed results: traces, spans, content, sessions, the ledger and summaries."""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterable
from typing import Any

from otel_agentdiag._internal.inputs import describe_input
from otel_agentdiag.storage.codec import SPAN_COLUMNS, bad_json, decode_span
from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.ledger import read_observers, read_session_stats
from otel_agentdiag.storage.migrations import StoreError
from otel_agentdiag.storage.provenance import IMPORTED_PREFIX
from otel_agentdiag.storage.rows import (
    ALL_SESSIONS,
    ObserverInfo,
    SessionStats,
    SessionSummary,
    StoredContent,
    StoredSpan,
    StoreSummary,
    TraceSummary,
    _AllSessions,
)

_TRACE_TOTALS = "SELECT MIN(start_ns), MAX(session), COUNT(*), SUM(status = 'error') FROM spans WHERE trace_id = ?"
"""What ``list_traces`` shows of one trace (its GROUP BY row, read through the key)."""


def _session_summary(
    session: str, count: int, size: int, first: int | None, last: int | None, traces: str | None, known: Any
) -> SessionSummary:
    """A :class:`SessionSummary` from a session's counted rows and its ``sessions`` row (``known``, or None)."""
    cleared, generation, pruned, cleared_spans = known if known is not None else (None, 0, 0, 0)
    return SessionSummary(
        session=session or None,
        span_count=int(count),
        bytes=int(size),
        first_start_ns=first,
        last_activity_ns=last,
        trace_ids=tuple(sorted(str(traces).split(","))) if traces else (),
        cleared_at_ns=cleared,
        generation=int(generation or 0),
        pruned_spans=int(pruned or 0),
        cleared_spans=int(cleared_spans or 0),
    )


class StoreReader(StoreConnection):
    """The read side of ``SpanStore``: every query a reader (CLI, diagnostics, a trace server) makes."""

    def span_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])

    def list_traces(self, *, limit: int | None = None) -> list[TraceSummary]:
        """Traces, newest first (by the start of their earliest span; ties by trace id).

        With a ``limit`` the newest traces are found by walking the start index from the newest span, so the
        cost follows the spans newer than the last trace listed, not the size of the store.
        """
        with self._lock:
            if limit is None or limit < 1:
                rows = self._conn.execute(
                    "SELECT trace_id, MIN(start_ns), MAX(session), COUNT(*), SUM(status = 'error')"
                    " FROM spans GROUP BY trace_id ORDER BY MIN(start_ns) DESC, trace_id LIMIT ?",
                    (-1 if limit is None else limit,),
                ).fetchall()
            else:
                rows = [
                    (trace_id, *self._conn.execute(_TRACE_TOTALS, (trace_id,)).fetchone())
                    for trace_id in self._newest_trace_ids(limit)
                ]
            out = []
            for trace_id, start_ns, session, count, errors in rows:
                root = self._conn.execute(
                    "SELECT name, status, start_ns, end_ns FROM spans WHERE trace_id = ?"
                    " ORDER BY parent_span_id IS NOT NULL, start_ns LIMIT 1",
                    (trace_id,),
                ).fetchone()
                name, status, root_start, root_end = root
                out.append(
                    TraceSummary(
                        trace_id=trace_id,
                        name=name,
                        start_ns=min(start_ns, root_start),
                        end_ns=root_end,
                        status=status,
                        span_count=int(count),
                        error_count=int(errors or 0),
                        session=session,
                    )
                )
            return out

    def _newest_trace_ids(self, limit: int) -> list[str]:
        """The ``limit`` trace ids with the latest earliest start (ties: smallest id first), newest first.

        Spans are read newest start first; each new trace's earliest start is looked up by its key. Once
        ``limit`` traces are known, a trace not seen yet has every span at or before the current position, so
        the walk stops when the position falls below the ``limit``-th latest earliest start found. Call with
        the lock held.
        """
        conn = self._conn
        earliest: dict[str, int] = {}
        heap: list[int] = []  # the `limit` latest earliest starts found so far (smallest first)
        cursor = conn.execute("SELECT start_ns, trace_id FROM spans ORDER BY start_ns DESC")
        try:
            for start_ns, trace_id in cursor:
                if len(heap) == limit and start_ns < heap[0]:
                    break
                if trace_id in earliest:
                    continue
                (first,) = conn.execute("SELECT MIN(start_ns) FROM spans WHERE trace_id = ?", (trace_id,)).fetchone()
                earliest[trace_id] = first
                if len(heap) < limit:
                    heapq.heappush(heap, first)
                elif first > heap[0]:
                    heapq.heapreplace(heap, first)
        finally:
            cursor.close()
        ordered = sorted(earliest.items(), key=lambda item: (-item[1], item[0]))
        return [trace_id for trace_id, _first in ordered[:limit]]

    def resolve_trace_id(self, text: str) -> str:
        """The full trace id for ``text`` (a full id or a unique prefix of at least 4 hex digits). Raises
        :class:`StoreError` with a message that describes ``text`` without repeating it."""
        needle = text.strip().lower()
        if not (4 <= len(needle) <= 32) or any(c not in "0123456789abcdef" for c in needle):
            raise StoreError(f"not a trace id: {describe_input(text)}; a trace id is 4 to 32 hex digits")
        with self._lock:
            matches: list[str] = [
                row[0]
                for row in self._conn.execute(
                    "SELECT DISTINCT trace_id FROM spans WHERE trace_id >= ? AND trace_id < ? LIMIT 2",
                    (needle, needle + "g"),
                )
            ]
        if not matches:
            raise StoreError(f"no trace in {self.path} matches the given id ({describe_input(text)})")
        if len(matches) > 1:
            raise StoreError(f"the given trace id prefix ({describe_input(text)}) is ambiguous; give more digits")
        return str(matches[0])

    def get_trace(self, trace_id: str) -> list[StoredSpan]:
        """All spans of one trace, ordered by start time."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                " WHERE s.trace_id = ? ORDER BY s.start_ns, s.span_id",
                (trace_id,),
            ).fetchall()
        return [decode_span(row) for row in rows]

    def spans_by_id(self, ids: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StoredSpan]:
        """The stored spans with these ``(trace_id, span_id)`` keys, read through the key; those not stored are
        absent."""
        found: dict[tuple[str, str], StoredSpan] = {}
        with self._lock:
            for key in dict.fromkeys(ids):
                row = self._conn.execute(
                    f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                    " WHERE s.trace_id = ? AND s.span_id = ?",
                    key,
                ).fetchone()
                if row is not None:
                    found[key] = decode_span(row)
        return found

    def trace_content(self, trace_id: str) -> list[StoredContent]:
        """The captured content of one trace's spans (local only: ``configure(capture_content=True)``), by
        span and in role order of capture. Empty for a trace captured without content."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT span_id, role, encoding, lossless, projection, size FROM span_content"
                " WHERE trace_id = ? ORDER BY span_id, id",
                (trace_id,),
            ).fetchall()
        found: list[StoredContent] = []
        for span_id, role, encoding, lossless, projection, size in rows:
            found.append(
                StoredContent(
                    role=str(role),
                    encoding=str(encoding),
                    lossless=bytes(lossless) if isinstance(lossless, (bytes, bytearray, memoryview)) else b"",
                    projection=projection if isinstance(projection, str) else "null",
                    span_id=str(span_id),
                    stored_size=size if isinstance(size, int) else 0,
                )
            )
        return found

    def content_summary(self) -> tuple[int, int]:
        """``(values, bytes)`` of captured content in the whole store."""
        with self._lock:
            count, size = self._conn.execute("SELECT COUNT(*), coalesce(SUM(size), 0) FROM span_content").fetchone()
        return int(count), int(size)

    def session_spans(self, session: str | None) -> list[StoredSpan]:
        """All spans of one session (None: spans outside any session), ordered by start time."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                " WHERE s.session IS ? ORDER BY s.start_ns, s.span_id",
                (session or None,),
            ).fetchall()
        return [decode_span(row) for row in rows]

    def list_sessions(self) -> list[SessionSummary]:
        """Sessions with rows or a ``sessions`` row (e.g. cleared), newest activity first.

        Counted from the rows themselves. Spans outside any session appear as ``session=None``, only when
        there are some. Sessions without rows (cleared or pruned empty) come last.
        """
        with self._lock:
            counted = self._conn.execute(
                "SELECT coalesce(session, ''), COUNT(*), coalesce(SUM(size), 0), MIN(start_ns),"
                " MAX(max(coalesce(end_ns, start_ns), start_ns)), group_concat(DISTINCT trace_id)"
                " FROM spans GROUP BY coalesce(session, '')"
            ).fetchall()
            known = {
                row[0]: row[1:]
                for row in self._conn.execute(
                    "SELECT session, cleared_at_ns, generation, pruned_spans, cleared_spans FROM sessions"
                )
            }
        out: list[SessionSummary] = []
        seen: set[str] = set()
        for session, count, size, first, last, traces in counted:
            seen.add(session)
            out.append(_session_summary(session, count, size, first, last, traces, known.get(session)))
        for session, (cleared, generation, pruned, cleared_spans) in known.items():
            if session in seen or not session:
                continue
            out.append(
                SessionSummary(
                    session=session,
                    span_count=0,
                    bytes=0,
                    first_start_ns=None,
                    last_activity_ns=None,
                    trace_ids=(),
                    cleared_at_ns=cleared,
                    generation=int(generation or 0),
                    pruned_spans=int(pruned or 0),
                    cleared_spans=int(cleared_spans or 0),
                )
            )
        out.sort(key=lambda s: (s.last_activity_ns is None, -(s.last_activity_ns or 0), s.session or ""))
        return out

    def session_summary(self, session: str | None) -> SessionSummary | None:
        """The entry :meth:`list_sessions` has for ``session`` (None: spans outside any session), or None when it
        has none; read through the session index, so its cost follows the session's size, not the store's."""
        key = session or ""
        where = "session = ?" if key else "(session IS NULL OR session = ?)"
        with self._lock:
            count, size, first, last, traces = self._conn.execute(
                "SELECT COUNT(*), coalesce(SUM(size), 0), MIN(start_ns),"
                " MAX(max(coalesce(end_ns, start_ns), start_ns)), group_concat(DISTINCT trace_id)"
                f" FROM spans WHERE {where}",
                (key,),
            ).fetchone()
            known = self._conn.execute(
                "SELECT cleared_at_ns, generation, pruned_spans, cleared_spans FROM sessions WHERE session = ?", (key,)
            ).fetchone()
        if not count and (not key or known is None):
            return None
        return _session_summary(key, count, size if count else 0, first, last, traces, known)

    def latest_session(self) -> str | None:
        """The first named session :meth:`list_sessions` lists (newest activity; ties: the smallest digest),
        observed sessions first: an imported session (``imported:...``) only when no observed session has rows;
        None when it lists none. What ``agentdiag status`` shows by default.

        Read through the start and end indexes: the newest activity of any span is its end or its start, so
        it is the larger of the newest end and the newest start among spans of a named session.
        """
        observed = f"session <> '' AND substr(session, 1, {len(IMPORTED_PREFIX)}) <> '{IMPORTED_PREFIX}'"
        with self._lock:
            conn = self._conn
            for named in (observed, "session <> ''"):
                newest: int | None = None
                for column in ("end_ns", "start_ns"):
                    found = conn.execute(
                        f"SELECT {column} FROM spans WHERE {column} IS NOT NULL AND {named}"
                        f" ORDER BY {column} DESC LIMIT 1"
                    ).fetchone()
                    if found is not None and (newest is None or found[0] > newest):
                        newest = found[0]
                if newest is not None:
                    # A span that ends or starts at the newest moment has it as its activity (nothing is newer).
                    (session,) = conn.execute(
                        f"SELECT MIN(session) FROM spans WHERE {named} AND (end_ns = ? OR start_ns = ?)",
                        (newest, newest),
                    ).fetchone()
                    return str(session)
            # No named session has rows: those left are cleared or pruned empty, listed by digest.
            (session,) = conn.execute("SELECT MIN(session) FROM sessions WHERE session <> ''").fetchone()
        return None if session is None else str(session)

    def session_stats(self, session: str | _AllSessions | None = ALL_SESSIONS) -> list[SessionStats]:
        """Cumulative stats rows, of one session (None: outside any session) or of all (the default)."""
        with self._lock:
            return read_session_stats(self._conn, session)

    def observers(self) -> list[ObserverInfo]:
        """Every observer that wrote rows or accounting, oldest start first."""
        with self._lock:
            return read_observers(self._conn)

    def store_summary(self) -> StoreSummary:
        """Rows and bytes counted from the rows; cumulative pruned counts; rows with malformed JSON columns.

        ``session_count`` is the number of distinct sessions with rows (spans outside any session not counted).
        """
        with self._lock:
            count, size, sessions = self._conn.execute(
                "SELECT COUNT(*), coalesce(SUM(size), 0), COUNT(DISTINCT session) FROM spans"
            ).fetchone()
            found = self._conn.execute("SELECT pruned_spans, pruned_bytes FROM store_stats WHERE id = 1").fetchone()
            malformed = self._malformed_rows()
        pruned_spans, pruned_bytes = found if found is not None else (0, 0)
        return StoreSummary(
            span_count=int(count),
            total_bytes=int(size),
            pruned_spans=int(pruned_spans),
            pruned_bytes=int(pruned_bytes),
            malformed_rows=malformed,
            session_count=int(sessions),
        )

    def _malformed_rows(self) -> int:
        """Rows that read back ``corrupt`` (a JSON column that does not decode to its type)."""
        try:
            (n,) = self._conn.execute(
                "SELECT COUNT(*) FROM spans s LEFT JOIN resources r ON r.id = s.resource_id WHERE"
                f" {bad_json('s.attributes', 'object')} OR {bad_json('s.events', 'array')}"
                f" OR {bad_json('s.links', 'array')}"
                f" OR (s.scope IS NOT NULL AND {bad_json('s.scope', 'object')})"
                f" OR (r.attributes IS NOT NULL AND {bad_json('r.attributes', 'object')})"
            ).fetchone()
            return int(n)
        except sqlite3.OperationalError:  # an SQLite without JSON functions: decode every row
            rows = self._conn.execute(
                f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
            )
            return sum(1 for row in rows if decode_span(row).corrupt)

    def resolve_session(self, text: str) -> str:
        """The stored session digest for ``text``: the digest itself, or a unique prefix of at least 4 characters
        of the digest or of its hex part (after the last ``:``). Raises :class:`StoreError` otherwise, with a
        message that describes ``text`` without repeating it."""
        needle = text.strip() if isinstance(text, str) else ""
        if not needle:
            raise StoreError("no session given")
        with self._lock:
            known = {
                row[0]
                for row in self._conn.execute(
                    "SELECT session FROM sessions WHERE session <> ''"
                    " UNION SELECT DISTINCT session FROM spans WHERE session IS NOT NULL"
                )
            }
        if needle in known:
            return needle
        if len(needle) < 4:
            raise StoreError(
                f"the given session prefix ({describe_input(text)}) is too short; give at least 4 characters"
            )
        lowered = needle.lower()
        matches = sorted(s for s in known if s.startswith(needle) or s.rsplit(":", 1)[-1].startswith(lowered))
        if not matches:
            raise StoreError(f"no session in {self.path} matches the given value ({describe_input(text)})")
        if len(matches) > 1:
            raise StoreError(
                f"the given session prefix ({describe_input(text)}) is ambiguous ({len(matches)} sessions);"
                " give more characters"
            )
        return str(matches[0])

"""Read queries over the store with typed results: traces, spans, content, sessions, the ledger and summaries."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from otel_agentdiag._internal.inputs import describe_input
from otel_agentdiag.storage.codec import SPAN_COLUMNS, bad_json, decode_span
from otel_agentdiag.storage.migrations import StoreError
from otel_agentdiag.storage.rows import (
    ALL_SESSIONS,
    ObserverInfo,
    SessionStats,
    StoredContent,
    StoredSpan,
    StoreSummary,
    _AllSessions,
)
from otel_agentdiag.storage.summary_reads import SummaryReader


class StoreReader(SummaryReader):
    """The read side of ``SpanStore``: every query a reader (CLI, diagnostics, a trace server) makes."""

    def span_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])

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

    def session_stats(self, session: str | _AllSessions | None = ALL_SESSIONS) -> list[SessionStats]:
        """Cumulative stats rows, of one session (None: outside any session) or of all (the default)."""
        from otel_agentdiag.storage.ledger import read_session_stats  # start-up: `show` reads no ledger

        with self._lock:
            return read_session_stats(self._conn, session)

    def observers(self) -> list[ObserverInfo]:
        """Every observer that wrote rows or accounting, oldest start first."""
        from otel_agentdiag.storage.ledger import read_observers

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
        message that describes ``text`` without repeating it. Index lookups of the ``sessions`` rows (every
        session with rows has one)."""
        needle = text.strip() if isinstance(text, str) else ""
        if not needle:
            raise StoreError("no session given")
        if self.is_session_key(needle, sources=1):
            return needle
        if len(needle) < 4:
            raise StoreError(
                f"the given session prefix ({describe_input(text)}) is too short; give at least 4 characters"
            )
        matches = sorted(
            self.session_keys(needle, sources=1, limit=2)
            | self.session_keys(needle.lower(), tail=True, sources=1, limit=2)
        )
        if not matches:
            raise StoreError(f"no session in {self.path} matches the given value ({describe_input(text)})")
        if len(matches) > 1:
            raise StoreError(
                f"the given session prefix ({describe_input(text)}) is ambiguous ({len(matches)} sessions);"
                " give more characters"
            )
        return str(matches[0])

"""Push marks: which stored spans ``agentdiag push`` delivered to which endpoint (named by digest, never by URL)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from otel_agentdiag.storage.codec import SPAN_COLUMNS, decode_span
from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.rows import StoredSpan


class PushMarks(StoreConnection):
    """The push-marks part of ``SpanStore``."""

    # Which stored spans `agentdiag push` delivered to which endpoint. ``endpoint`` is always a digest of the
    # endpoint's normalised URL (``sha256:`` and 64 hex digits, see otel_agentdiag.diagnostics.push.endpoint_key),
    # never the URL itself: a URL may carry credentials. A value of any other shape raises ``ValueError``.
    @staticmethod
    def _check_push_endpoint(endpoint: str) -> None:
        digest = endpoint[7:] if isinstance(endpoint, str) and endpoint.startswith("sha256:") else ""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("a push-mark endpoint must be a digest ('sha256:' and 64 hex digits), not a URL")

    @staticmethod
    def _push_filter(sessions: Sequence[str] | None, since_ns: int | None) -> tuple[list[str], list[Any]]:
        """SQL conditions and their arguments: spans of ``sessions`` (None: all) started at/after ``since_ns``."""
        clauses: list[str] = []
        args: list[Any] = []
        if sessions is not None:
            chosen = sorted(set(sessions))
            clauses.append(f"s.session IN ({','.join('?' * len(chosen))})" if chosen else "0")
            args.extend(chosen)
        if since_ns is not None:
            clauses.append("s.start_ns >= ?")
            args.append(int(since_ns))
        return clauses, args

    def pushed_span_ids(self, endpoint: str) -> set[tuple[str, str]]:
        """``(trace_id, span_id)`` of every span marked as pushed to ``endpoint``."""
        self._check_push_endpoint(endpoint)
        with self._lock:
            rows = self._conn.execute("SELECT trace_id, span_id FROM push_marks WHERE endpoint = ?", (endpoint,))
            return {(str(t), str(s)) for t, s in rows}

    def mark_pushed(self, endpoint: str, ids: Sequence[tuple[str, str]], *, now_ns: int | None = None) -> int:
        """Mark spans as pushed to ``endpoint``, in one transaction; returns how many marks are new."""
        self._check_push_endpoint(endpoint)
        now = time.time_ns() if now_ns is None else now_ns
        params = [(endpoint, str(trace_id), str(span_id), now) for trace_id, span_id in ids]
        if not params:
            return 0
        with self._transaction() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO push_marks (endpoint, trace_id, span_id, pushed_ns) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (endpoint, trace_id, span_id) DO NOTHING",
                params,
            )
            return int(conn.total_changes - before)

    def push_backlog(
        self, endpoint: str, *, sessions: Sequence[str] | None = None, since_ns: int | None = None
    ) -> tuple[int, int]:
        """``(not yet pushed, already pushed)``: the stored spans a push to ``endpoint`` selects, split by mark.

        ``sessions`` (None: every span, those outside any session included) and ``since_ns`` (spans that
        started at or after it) select as in :meth:`unpushed_spans`.
        """
        self._check_push_endpoint(endpoint)
        clauses, args = self._push_filter(sessions, since_ns)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        with self._lock:
            total, pushed = self._conn.execute(
                "SELECT COUNT(*), COUNT(m.span_id) FROM spans s LEFT JOIN push_marks m"
                " ON m.endpoint = ? AND m.trace_id = s.trace_id AND m.span_id = s.span_id" + where,
                (endpoint, *args),
            ).fetchone()
        return int(total) - int(pushed), int(pushed)

    def unpushed_spans(
        self,
        endpoint: str,
        *,
        sessions: Sequence[str] | None = None,
        since_ns: int | None = None,
        batch_size: int = 512,
    ) -> Iterator[list[StoredSpan]]:
        """The selected spans not marked as pushed to ``endpoint``, in pages of up to ``batch_size``, ordered by
        (start time, trace id, span id). See :meth:`push_backlog` for ``sessions`` and ``since_ns``.

        Each page is one query under the lock (keyset pagination), so writers interleave between pages; a span
        stored meanwhile behind the current position is left for the next push.
        """
        self._check_push_endpoint(endpoint)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        clauses, args = self._push_filter(sessions, since_ns)
        clauses.append("m.span_id IS NULL")
        after: tuple[Any, ...] = ()
        while True:
            where = " AND ".join([*clauses, "(s.start_ns, s.trace_id, s.span_id) > (?, ?, ?)"] if after else clauses)
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                    " LEFT JOIN push_marks m ON m.endpoint = ? AND m.trace_id = s.trace_id AND m.span_id = s.span_id"
                    f" WHERE {where} ORDER BY s.start_ns, s.trace_id, s.span_id LIMIT ?",
                    (endpoint, *args, *after, batch_size),
                ).fetchall()
            if rows:
                yield [decode_span(row) for row in rows]
            if len(rows) < batch_size:
                return
            after = (rows[-1][6], rows[-1][0], rows[-1][1])

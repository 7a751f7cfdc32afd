"""Ingest violations: durable records of input that was not taken, naming what and where, never the content."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.rows import ALL_SESSIONS, _AllSessions


@dataclass(frozen=True, slots=True)
class Violation:
    """One durable record of input that was not taken (``agentdiag ingest``: a malformed or rejected line).

    It names what and where, never the content: ``reason`` is a code, ``detail`` a location such as
    ``line 12``. ``session`` is the digest of the session the input belonged to, None when not known.
    """

    id: int
    recorded_ns: int
    source: str
    session: str | None
    reason: str
    detail: str


class ViolationReads(StoreConnection):
    """The read half of the violation log (:meth:`violations`, :meth:`violation_counts`): a part of both
    ``SpanStore`` and the read-only ``ReadOnlyStore`` (a session's receipt counts its violations)."""

    def violations(self, session: str | _AllSessions | None = ALL_SESSIONS) -> list[Violation]:
        """Recorded violations, oldest first: of one session (None: those whose session is not known), or all."""
        sql = "SELECT id, recorded_ns, source, session, reason, detail FROM violations"
        args: tuple[Any, ...] = ()
        if not isinstance(session, _AllSessions):
            sql += " WHERE session = ?"
            args = (session or "",)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", args).fetchall()
        return [
            Violation(
                id=int(row[0]),
                recorded_ns=int(row[1]),
                source=str(row[2]),
                session=str(row[3]) or None,
                reason=str(row[4]),
                detail=str(row[5]),
            )
            for row in rows
        ]

    def violation_counts(self) -> dict[str | None, int]:
        """Violations per session digest (None: session not known); sessions without any are absent."""
        with self._lock:
            rows = self._conn.execute("SELECT session, COUNT(*) FROM violations GROUP BY session").fetchall()
        return {(str(session) or None): int(n) for session, n in rows}


class ViolationLog(ViolationReads):
    """The violations part of ``SpanStore``: :meth:`record_violations`, and the reads of :class:`ViolationReads`."""

    Violation: TypeAlias = Violation
    """One violation record (also ``SpanStore.Violation``)."""

    _VIOLATION_CODE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
    _VIOLATION_DETAIL_CHARS = _VIOLATION_CODE_CHARS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ .:,=#-")
    _VIOLATION_SESSION_MAX = 512

    @classmethod
    def _is_violation_code(cls, text: object) -> bool:
        """``[a-z][a-z0-9_]*``, at most 64 characters."""
        return (
            isinstance(text, str)
            and 0 < len(text) <= 64
            and text[0].isalpha()
            and all(c in cls._VIOLATION_CODE_CHARS for c in text)
        )

    def record_violations(
        self, source: str, entries: Sequence[tuple[str | None, str, str]], *, now_ns: int | None = None
    ) -> int:
        """Append violations of ``source`` (e.g. ``ingest``), each ``(session digest or None, reason, detail)``,
        in one transaction; returns how many were written.

        ``source`` and ``reason`` must be codes (``[a-z][a-z0-9_]*``), ``detail`` a short location (letters,
        digits, spaces and ``_.:,=#-``, at most 120 characters): anything else raises ``ValueError`` before
        anything is written, so input text cannot be stored here by mistake. Raises ``sqlite3.Error`` (or
        :class:`StoreError`) with nothing written.
        """
        now = time.time_ns() if now_ns is None else now_ns
        if not self._is_violation_code(source):
            raise ValueError("a violation source must be a code such as 'ingest'")
        rows: list[tuple[int, str, str, str, str]] = []
        for session, reason, detail in entries:
            if session is not None and (
                not isinstance(session, str) or len(session) > self._VIOLATION_SESSION_MAX or not session.isprintable()
            ):
                raise ValueError("a violation's session must be a session digest or None")
            if not self._is_violation_code(reason):
                raise ValueError("a violation reason must be a code such as 'malformed_json'")
            if not isinstance(detail, str) or len(detail) > 120 or not set(detail) <= self._VIOLATION_DETAIL_CHARS:
                raise ValueError("a violation detail must be a short location such as 'line 12'")
            rows.append((now, source, session or "", reason, detail))
        if not rows:
            return 0
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO violations (recorded_ns, source, session, reason, detail) VALUES (?, ?, ?, ?, ?)", rows
            )
        return len(rows)

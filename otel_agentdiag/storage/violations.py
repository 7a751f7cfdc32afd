"""Ingest violations: durable records of input that was not taken, naming what and where, never the content."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeAlias

from otel_agentdiag.storage.violation_reads import Violation, ViolationReads

__all__ = ["Violation", "ViolationLog"]


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

"""The read half of the ingest violation log: the ``Violation`` record, and reads shared by every store class.

A part of ``SpanStore`` and of the read-only ``ReadOnlyStore`` alike (a session's receipt counts its violations),
kept apart from :mod:`~otel_agentdiag.storage.violations` (the writes) so a reader loads only what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.rows import ALL_SESSIONS, _AllSessions

__all__ = ["Violation", "ViolationReads"]


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

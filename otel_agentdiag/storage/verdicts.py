"""Stored strict-projection verdicts: what ``push`` and ``export`` may reuse instead of re-validating a row again.

One row of ``span_verdicts`` per span: ``verdict``, an opaque blob the diagnostics layer made from the span's
strict-policy projection (:mod:`otel_agentdiag.diagnostics.verdicts`), and ``mac``, a keyed MAC over the span's
stored columns, the policy, the key and the blob. The store only keeps them: it never trusts or checks them; the
reader re-validates any row whose MAC does not verify, so a row or a verdict changed without the key is never
reused. Whatever deletes or changes a span deletes its verdict (triggers of migration 9).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from otel_agentdiag.storage.codec import SPAN_COLUMNS
from otel_agentdiag.storage.connection import StoreConnection

VERDICT_COLUMNS = SPAN_COLUMNS + ", CAST(v.verdict AS BLOB), CAST(v.mac AS BLOB)"
""":data:`~otel_agentdiag.storage.codec.SPAN_COLUMNS` (columns 0 to 16, what ``decode_span`` reads), then the
stored verdict (17) and its MAC (18), both None when there is none; from :data:`VERDICT_JOIN`. Read as bytes
whatever type a writer gave them (a TEXT value that is not UTF-8 would make the whole query fail)."""

VERDICT_JOIN = (
    "spans s LEFT JOIN resources r ON r.id = s.resource_id"
    " LEFT JOIN span_verdicts v ON v.trace_id = s.trace_id AND v.span_id = s.span_id"
)

RawSpanRow = tuple[Any, ...]
"""A row of :data:`VERDICT_COLUMNS`: the stored columns as SQLite returns them, undecoded."""


class VerdictStore(StoreConnection):
    """The verdict part of ``SpanStore``: raw span rows with their stored verdicts, and saving verdicts."""

    def session_span_rows(self, session: str | None) -> list[RawSpanRow]:
        """:meth:`~otel_agentdiag.storage.queries.StoreReader.session_spans` undecoded, with verdict and MAC:
        the same rows in the same order (start time, span id)."""
        with self._lock:
            return self._conn.execute(
                f"SELECT {VERDICT_COLUMNS} FROM {VERDICT_JOIN} WHERE s.session IS ? ORDER BY s.start_ns, s.span_id",
                (session or None,),
            ).fetchall()

    def save_verdicts(self, verdicts: Sequence[tuple[str, str, bytes, bytes]]) -> int:
        """Store ``(trace_id, span_id, verdict, mac)`` rows (replacing older ones), in one transaction; a verdict
        of a span that is not stored (deleted meanwhile) is not kept. Returns how many were written."""
        if not verdicts:
            return 0
        with self._transaction() as conn:
            return save_verdicts_in(conn, verdicts)


def save_verdicts_in(conn: sqlite3.Connection, verdicts: Sequence[tuple[str, str, bytes, bytes]]) -> int:
    """:meth:`VerdictStore.save_verdicts` inside a write transaction the caller holds (push: with its marks)."""
    if not verdicts:
        return 0
    before = conn.total_changes
    conn.executemany(
        "INSERT OR REPLACE INTO span_verdicts (trace_id, span_id, verdict, mac)"
        " SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM spans WHERE trace_id = ?1 AND span_id = ?2)",
        verdicts,
    )
    return int(conn.total_changes - before)

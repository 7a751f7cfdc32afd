"""The ``operations`` summary: each (service, span name, span kind) the store holds, with its span count.

What the Jaeger APIs of ``agentdiag serve`` list as services and operations, read from this small table instead
of the spans. Migration 11 made it and filled it from the rows. The writer adds each batch's counts in its
transaction (:func:`record_operations`, called by :func:`~otel_agentdiag.storage.summaries.record_batch`); a
trigger takes one off for each span row deleted (retention, ``clear``, raw SQL), and the deleting transaction's
:func:`~otel_agentdiag.storage.summaries.flush_deleted` removes the entries no span is left of: a cleared or
pruned span's name leaves no byte here either (``scrub``'s promise). Both are additions, so their order in a
transaction does not matter (a row pruned in the batch that wrote it nets to zero). Readers take entries with a
positive count only. The service is the resource's ``service.name`` when it is non-empty text, else
:data:`UNKNOWN_SERVICE`, the name the Jaeger-JSON encoder gives such a span's process.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

from otel_agentdiag import semconv as sc
from otel_agentdiag.storage.rows import SpanRow

UNKNOWN_SERVICE = sc.UNKNOWN_SERVICE

SERVICE_SQL = (
    "CASE WHEN json_valid(r.attributes) AND json_type(r.attributes, '$.\"service.name\"') = 'text'"
    " AND json_extract(r.attributes, '$.\"service.name\"') <> ''"
    f" THEN json_extract(r.attributes, '$.\"service.name\"') ELSE '{UNKNOWN_SERVICE}' END"
)
"""SQL: a span's service (``r`` is its ``resources`` row)."""

_FROM_ROWS = (
    f"INSERT INTO operations (service, name, span_kind, span_count) SELECT {SERVICE_SQL}, s.name, s.span_kind,"
    " COUNT(*) FROM spans s LEFT JOIN resources r ON r.id = s.resource_id GROUP BY 1, 2, 3"
)


def service_of(row: SpanRow) -> str:
    service = row.resource.get("service.name")
    return service if isinstance(service, str) and service else UNKNOWN_SERVICE


def record_operations(conn: sqlite3.Connection, written: Sequence[SpanRow]) -> None:
    """Add a batch's rows to their (service, name, span kind) counts; call in the writer's transaction."""
    counts = Counter((service_of(row), row.name, row.span_kind) for row in written)
    if counts:
        conn.executemany(
            "INSERT INTO operations (service, name, span_kind, span_count) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (service, name, span_kind) DO UPDATE SET span_count = span_count + excluded.span_count",
            [(*triple, n) for triple, n in counts.items()],
        )


def forget_empty(conn: sqlite3.Connection) -> None:
    """Remove the entries no span is left of (after deletes, in the deleting transaction)."""
    conn.execute("DELETE FROM operations WHERE span_count <= 0")


def rebuild_operations(conn: sqlite3.Connection) -> None:
    """Recompute the table from the rows (in the caller's transaction); nothing for a store without it."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'operations'").fetchone():
        conn.execute("DELETE FROM operations")
        conn.execute(_FROM_ROWS)

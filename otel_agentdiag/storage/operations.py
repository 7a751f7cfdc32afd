"""The ``operations`` summary: each (service, span name, span kind) the store has held, kept at write time.

What the Jaeger APIs of ``agentdiag serve`` list as services and operations, read from this small table instead
of the spans. Migration 11 made it and filled it from the rows; the writer adds each batch's distinct triples in
its transaction (:func:`record_operations`, called by :func:`~otel_agentdiag.storage.summaries.record_batch`).
Like Jaeger's own operation index, an entry outlives its spans: retention and ``clear`` do not remove it (a
search for it then finds no trace). The service is the resource's ``service.name`` when it is non-empty text,
else :data:`UNKNOWN_SERVICE`, the name the Jaeger-JSON encoder gives such a span's process.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from otel_agentdiag.storage.rows import SpanRow

UNKNOWN_SERVICE = "unknown_service"

SERVICE_SQL = (
    "CASE WHEN json_valid(r.attributes) AND json_type(r.attributes, '$.\"service.name\"') = 'text'"
    " AND json_extract(r.attributes, '$.\"service.name\"') <> ''"
    f" THEN json_extract(r.attributes, '$.\"service.name\"') ELSE '{UNKNOWN_SERVICE}' END"
)
"""SQL: a span's service (``r`` is its ``resources`` row)."""

_FROM_ROWS = (
    f"INSERT OR IGNORE INTO operations (service, name, span_kind) SELECT DISTINCT {SERVICE_SQL}, s.name, s.span_kind"
    " FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
)

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE operations (
        service TEXT NOT NULL,
        name TEXT NOT NULL,
        span_kind TEXT NOT NULL,
        PRIMARY KEY (service, name, span_kind)
    ) WITHOUT ROWID""",
    _FROM_ROWS,
)
"""Migration 11: the table, filled from the rows."""


def service_of(row: SpanRow) -> str:
    service = row.resource.get("service.name")
    return service if isinstance(service, str) and service else UNKNOWN_SERVICE


def record_operations(conn: sqlite3.Connection, written: Sequence[SpanRow]) -> None:
    """Add the (service, name, span kind) triples of a batch's rows; call in the writer's transaction."""
    triples = {(service_of(row), row.name, row.span_kind) for row in written}
    if triples:
        conn.executemany("INSERT OR IGNORE INTO operations (service, name, span_kind) VALUES (?, ?, ?)", triples)


def rebuild_operations(conn: sqlite3.Connection) -> None:
    """Recompute the table from the rows (in the caller's transaction); nothing for a store without it."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'operations'").fetchone():
        conn.execute("DELETE FROM operations")
        conn.execute(_FROM_ROWS)

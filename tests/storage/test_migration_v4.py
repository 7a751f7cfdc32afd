"""Migration 4 (the end time index) on a store written with schema version 3."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import query, row

from otel_agentdiag.storage import SpanStore
from otel_agentdiag.storage.migrations import MIGRATIONS


def _as_v3(path: Path) -> None:
    """Turn a current store into the version-3 store it was before migration 4 (same tables and rows; the
    indexes migration 8 dropped are back, and 8 is undone with 4, so that both run again)."""
    query(path, "DROP INDEX IF EXISTS spans_end")
    for name, column in (("spans_kind", "kind"), ("spans_name", "name"), ("spans_status", "status")):
        query(path, f"CREATE INDEX IF NOT EXISTS {name} ON spans({column})")
    query(path, "DELETE FROM schema_migrations WHERE version IN (4, 8)")


def test_v3_store_gets_the_end_index_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i, session="sess-a" if i % 2 else "sess-b") for i in range(6)])
    _as_v3(path)
    before = query(path, "SELECT * FROM spans ORDER BY rowid")
    assert query(path, "SELECT 1 FROM sqlite_master WHERE name = 'spans_end'") == []

    with SpanStore(path, create=False) as store:
        versions = [r[0] for r in query(path, "SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions == [m.version for m in MIGRATIONS]
        assert 4 in versions
        # Migration 4 made the index; migration 8 drops it again (the summaries answer what it served).
        assert query(path, "SELECT 1 FROM sqlite_master WHERE name = 'spans_end'") == []
        assert query(path, "SELECT * FROM spans ORDER BY rowid") == before
        assert store.latest_session() == "sess-a"  # span 5 ends last


def test_reopening_a_v4_store_applies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    applied = query(path, "SELECT version, applied_at FROM schema_migrations ORDER BY 1")
    SpanStore(path, create=False).close()
    assert query(path, "SELECT version, applied_at FROM schema_migrations ORDER BY 1") == applied

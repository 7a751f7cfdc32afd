"""Migration 5 (captured content) on a store written with schema version 4."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import query, row

from otel_agentdiag.storage import ContentRow, SpanStore
from otel_agentdiag.storage.migrations import MIGRATIONS


def _as_v4(path: Path) -> None:
    """Turn a current store into the version-4 store it was before migration 5 (same tables and rows)."""
    query(path, "DROP TRIGGER span_content_follows_span")
    query(path, "DROP TABLE span_content")
    query(path, "DELETE FROM schema_migrations WHERE version = 5")


def test_v4_store_gets_the_content_table_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i) for i in range(4)])
    _as_v4(path)
    before = query(path, "SELECT * FROM spans ORDER BY rowid")

    with SpanStore(path, create=False) as store:
        assert [r[0] for r in query(path, "SELECT version FROM schema_migrations ORDER BY 1")] == list(
            m.version for m in MIGRATIONS
        )
        assert query(path, "SELECT * FROM spans ORDER BY rowid") == before
        assert store.trace_content("a" * 32) == []
        item = ContentRow(role="gen_ai.input.messages", encoding="agentdiag-content/1", lossless=b"x", projection="1")
        store.write_batch([row(9)], content=[[item]])
        assert [c.span_id for c in store.trace_content("a" * 32)] == [row(9).span_id]
        # The trigger came with the table: a span's content goes with the span.
        assert store.clear_session("sess-a") == 5
        assert store.content_summary() == (0, 0)

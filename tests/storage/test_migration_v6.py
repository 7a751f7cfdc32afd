"""Migration 6 (provenance) on a store written with schema version 5: rows kept, every observer reads as
observed (a store of version 5 recorded no provenance), imported writes work at once."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import check_ledger, query, row

from otel_agentdiag.storage import Accounting, SpanStore
from otel_agentdiag.storage.migrations import MIGRATIONS


def _as_v5(path: Path) -> None:
    """Turn a current store into the version-5 store it was before migration 6 (same tables and rows)."""
    query(path, "ALTER TABLE observers DROP COLUMN imported")
    query(path, "DELETE FROM schema_migrations WHERE version = 6")


def test_v5_store_gets_observer_provenance_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i) for i in range(4)], Accounting(observer="0123456789abcdef"))
    _as_v5(path)
    assert "imported" not in {c[1] for c in query(path, "PRAGMA table_info(observers)")}
    spans = query(path, "SELECT * FROM spans ORDER BY rowid")
    ledger = query(path, "SELECT * FROM session_stats ORDER BY observer, session")
    observers = query(path, "SELECT * FROM observers ORDER BY observer")

    with SpanStore(path, create=False) as store:
        versions = [r[0] for r in query(path, "SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions == [m.version for m in MIGRATIONS] and 6 in versions  # every later migration too
        assert query(path, "SELECT * FROM spans ORDER BY rowid") == spans
        assert query(path, "SELECT * FROM session_stats ORDER BY observer, session") == ledger
        assert [r[:-1] for r in query(path, "SELECT * FROM observers ORDER BY observer")] == observers
        assert [(o.observer, o.imported) for o in store.observers()] == [("0123456789abcdef", False)]
        imported = store.write_batch(
            [row(9, observer="fedcba9876543210", sequence=0)], Accounting(observer="fedcba9876543210"), imported=True
        )
        assert imported.inserted == 1
        assert {o.observer: o.imported for o in store.observers()} == {
            "0123456789abcdef": False,
            "fedcba9876543210": True,
        }
        assert [s.session for s in store.session_spans("imported:sess-a")] == ["imported:sess-a"]
    check_ledger(path)

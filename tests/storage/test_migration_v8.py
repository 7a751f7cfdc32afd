"""Migration 8 (unused span indexes) on a store written with schema version 7: the four indexes no reader uses
are dropped, rows and summaries are kept, and what readers and retention ask still goes through an index."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import query, row

from otel_agentdiag.storage import LATEST_VERSION, SpanStore, receipt_reads

DROPPED = ("spans_kind", "spans_name", "spans_status", "spans_end")
_V7_INDEXES = (
    "CREATE INDEX spans_kind ON spans(kind)",
    "CREATE INDEX spans_name ON spans(name)",
    "CREATE INDEX spans_status ON spans(status)",
    "CREATE INDEX spans_end ON spans(end_ns)",
)


def _as_v7(path: Path) -> None:
    """Turn a current store into the version-7 store it was before migration 8 (same tables and rows)."""
    for sql in _V7_INDEXES:
        query(path, sql)
    query(path, "DELETE FROM schema_migrations WHERE version = 8")


def _indexes(path: Path) -> set[str]:
    return {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'spans'")}


def _plan(path: Path, sql: str, args: tuple[object, ...]) -> str:
    return " | ".join(r[3] for r in query(path, "EXPLAIN QUERY PLAN " + sql, args))


def test_v7_store_loses_the_unused_indexes_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i, session="sess-a" if i % 2 else "sess-b") for i in range(6)])
    _as_v7(path)
    assert set(DROPPED) <= _indexes(path)
    spans = query(path, "SELECT * FROM spans ORDER BY rowid")
    sessions = query(path, "SELECT * FROM sessions ORDER BY session")
    traces = query(path, "SELECT * FROM trace_summaries ORDER BY trace_id")

    with SpanStore(path, create=False) as store:
        versions = [r[0] for r in query(path, "SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions == list(range(1, LATEST_VERSION + 1)) and 8 in versions
        assert not set(DROPPED) & _indexes(path)
        assert {"spans_session", "spans_start"} <= _indexes(path)
        assert query(path, "SELECT * FROM spans ORDER BY rowid") == spans
        assert query(path, "SELECT * FROM sessions ORDER BY session") == sessions
        assert query(path, "SELECT * FROM trace_summaries ORDER BY trace_id") == traces
        assert store.latest_session() == "sess-a"  # span 5 ends last
        store.write_batch([row(7, session="sess-b")])
        assert store.latest_session() == "sess-b"


def test_what_readers_and_retention_ask_still_uses_an_index(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([row(i, session="sess-a") for i in range(3)])
    asked = {
        "a session's rows": (
            "SELECT rowid FROM spans WHERE session IS ? ORDER BY start_ns, observer, sequence, plain, rowid",
            ("sess-a",),
        ),
        "the store's oldest rows": ("SELECT rowid, size, session FROM spans ORDER BY start_ns, rowid", ()),
        "the oldest start": ("SELECT MIN(start_ns) FROM spans", ()),
        "one span": ("SELECT name FROM spans WHERE trace_id = ? AND span_id = ?", ("t", "s")),
    }
    for what, (sql, args) in asked.items():
        plan = _plan(path, sql, args)
        assert "USING" in plan and "TEMP B-TREE" not in plan, (what, plan)  # an index, and no sort
    # A receipt's figures read that index alone (its rows never), whatever the session's size.
    figures = _plan(path, receipt_reads._FIGURES.format(where="WHERE session IS ?"), ("sess-a",))
    assert "COVERING INDEX spans_session" in figures and "FOR GROUP BY" not in figures, figures
    per_observer = _plan(path, receipt_reads._FIGURES_PER_OBSERVER, ("sess-a",))
    assert "COVERING INDEX spans_session" in per_observer, per_observer

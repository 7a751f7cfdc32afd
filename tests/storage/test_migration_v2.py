"""Migration 2 on a store file built with the version-1 schema (its SQL copied here, as it shipped)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_helpers import T0, query, row

from otel_agentdiag.storage import RetentionLimits, SpanStore, StoreError
from otel_agentdiag.storage.migrations import MIGRATIONS

LEDGER_CHECK = "off"
"""Rows written before version 2 have no stats: the ledger cannot balance for them (a receipt says so)."""

V1_SCHEMA = (
    "CREATE TABLE resources (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, attributes TEXT NOT NULL)",
    """CREATE TABLE spans (
        trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_span_id TEXT, name TEXT NOT NULL, kind TEXT NOT NULL,
        span_kind TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER, status TEXT NOT NULL, session TEXT,
        attributes TEXT NOT NULL, events TEXT NOT NULL, links TEXT NOT NULL,
        resource_id INTEGER REFERENCES resources(id), scope TEXT, PRIMARY KEY (trace_id, span_id)
    )""",
    "CREATE INDEX spans_session ON spans(session, start_ns)",
    "CREATE INDEX spans_start ON spans(start_ns)",
    "CREATE INDEX spans_kind ON spans(kind)",
    "CREATE INDEX spans_name ON spans(name)",
    "CREATE INDEX spans_status ON spans(status)",
    "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    "INSERT INTO schema_migrations VALUES (1, 'spans and resources', '2025-01-01T00:00:00+00:00')",
    "PRAGMA application_id = 1095189575",
)

V1_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, end_ns, status, session,"
    " attributes, events, links, resource_id, scope"
)


def build_v1(path: Path) -> list[tuple]:
    """A version-1 store with six spans (two sessions, one without, one malformed, one non-ASCII)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in V1_SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO resources (digest, attributes) VALUES ('d1', '{\"service.name\":\"old\"}')")
    rows = []
    for i, (session, attributes, name) in enumerate(
        [
            ("old-a", '{"k":"v"}', "one"),
            ("old-a", '{"k":"v"}', "two"),
            ("old-a", '{"text":"é€😀"}', "naïve"),
            ("old-b", '{"k":"v"}', "three"),
            (None, '{"k":"v"}', "four"),
            ("old-b", "{not json", "broken"),
        ]
    ):
        values = (
            "f" * 32,
            f"{i:016x}",
            None,
            name,
            "other",
            "internal",
            T0 + i,
            T0 + i + 5,
            "ok",
            session,
            attributes,
            "[]",
            "[]",
            1,
            '{"name":"old","version":"0"}' if i % 2 else None,
        )
        conn.execute(f"INSERT INTO spans ({V1_COLUMNS}) VALUES ({', '.join('?' * 15)})", values)
        rows.append(values)
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            Path(f"{path}{suffix}").chmod(0o600)
    return rows


def test_v1_store_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    rows = build_v1(path)
    with SpanStore(path, create=False) as store:
        versions = [r[0] for r in query(path, "SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions == [m.version for m in MIGRATIONS]
        assert query(path, f"SELECT {V1_COLUMNS} FROM spans ORDER BY span_id") == rows
        assert query(path, "SELECT DISTINCT observer, sequence FROM spans") == [(None, None)]
        # size: UTF-8 bytes of the name and the JSON columns, as the writer computes it
        for (span_id_, size), values in zip(
            query(path, "SELECT span_id, size FROM spans ORDER BY span_id"), rows, strict=True
        ):
            assert span_id_ == values[1]
            texts = [values[3], values[10], values[11], values[12], values[14] or ""]
            assert size == sum(len(t.encode()) for t in texts)
        indexes = {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "spans_session" in indexes and "spans_session_sequence" not in indexes
        # Running totals start from the rows.
        total = sum(r[0] for r in query(path, "SELECT size FROM spans"))
        assert query(path, "SELECT span_count, total_bytes, pruned_spans FROM store_stats") == [(6, total, 0)]
        assert dict(query(path, "SELECT session, span_count FROM sessions")) == {"old-a": 3, "old-b": 2, "": 1}
        # The old rows read back through the new API (no stats: they were written before there were any).
        summary = store.store_summary()
        assert (summary.span_count, summary.session_count, summary.malformed_rows) == (6, 2, 1)
        assert [s.session for s in store.list_sessions()] == ["old-b", None, "old-a"]
        assert [s.name for s in store.session_spans("old-a")] == ["one", "two", "naïve"]
        assert store.session_stats() == []

        # New writes and retention work on the migrated file.
        assert store.write_batch([row(1, session="old-a", trace_id="e" * 32, start=100)]).inserted == 1
        store.retention = RetentionLimits(max_session_spans=2)
        assert store.prune().spans == 2
        assert [s.name for s in store.session_spans("old-a")] == ["naïve", "span"]


def test_migrating_twice_applies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    build_v1(path)
    SpanStore(path).close()
    applied = query(path, "SELECT * FROM schema_migrations")
    SpanStore(path).close()
    assert query(path, "SELECT * FROM schema_migrations") == applied


def test_read_only_v1_store_cannot_migrate_and_is_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    build_v1(path)
    with open(path, "r+b") as f:  # write version 3: read-only for SQLite, even for root
        f.seek(18)
        f.write(b"\x03")
    content = path.read_bytes()
    with pytest.raises(StoreError, match="readonly"):
        SpanStore(path, create=False)
    assert path.read_bytes() == content


def test_processes_opening_a_v1_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    build_v1(path)
    code = textwrap.dedent(
        f"""
        import json, sys
        from otel_agentdiag.storage import SpanStore
        sys.stdin.readline()  # start together
        with SpanStore({str(path)!r}) as store:
            print(json.dumps(store.store_summary().span_count))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=60) for proc in procs]
    assert [(proc.returncode, json.loads(out)) for proc, (out, _err) in zip(procs, results, strict=True)] == [
        (0, 6)
    ] * 4
    assert query(path, "SELECT version FROM schema_migrations ORDER BY 1") == [(m.version,) for m in MIGRATIONS]
    assert query(path, "SELECT span_count FROM store_stats") == [(6,)]

"""``ReadOnlyStore`` (the reader ``agentdiag show`` and ``traces`` open): the same rows, errors and trust checks as
``SpanStore(path, read_only=True)``, and no writes."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from storage_helpers import row
from test_migration_v2 import build_v1

from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.storage import SpanStore, StoreError
from otel_agentdiag.storage.connection import StoreNeedsUpgrade
from otel_agentdiag.storage.reading import ReadOnlyStore

OTHER_UID = 12345
OTHER_GID = 23456
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_it_reads_what_a_full_reader_reads_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    with SpanStore(path) as writer:
        writer.write_spans([row(i) for i in range(3)])
    before = digest(path)
    with SpanStore(path, read_only=True) as full, ReadOnlyStore(path) as reader:
        assert reader.read_only
        assert reader.span_count() == full.span_count() == 3
        assert reader.list_traces() == full.list_traces()
        trace_id = full.list_traces()[0].trace_id
        assert reader.resolve_trace_id(trace_id[:8]) == trace_id
        assert reader.get_trace(trace_id) == full.get_trace(trace_id)
        assert not hasattr(reader, "write_spans") and not hasattr(reader, "clear_session")
        with pytest.raises(sqlite3.OperationalError):  # nothing written, even by hand
            reader._conn.execute("DELETE FROM spans")
    assert digest(path) == before


def test_it_never_creates_a_store_nor_takes_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    with pytest.raises(StoreError):
        ReadOnlyStore(path)
    assert not path.exists()
    path.parent.mkdir(mode=0o700)
    path.touch(mode=0o600)
    with pytest.raises(StoreError, match="empty"):
        ReadOnlyStore(path)
    assert path.stat().st_size == 0


def test_it_leaves_an_older_store_to_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    build_v1(path)
    before = digest(path)
    with pytest.raises(StoreNeedsUpgrade):
        ReadOnlyStore(path)
    assert digest(path) == before


def test_it_refuses_a_store_others_may_write(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    SpanStore(path).close()
    if IS_ROOT:
        os.chown(path.parent, -1, OTHER_GID)
    path.parent.chmod(0o770)
    with pytest.raises(UntrustedPathError, match="writable by group or others"):
        ReadOnlyStore(path)


@pytest.mark.skipif(not IS_ROOT, reason="simulating another user's file needs chown, which needs root")
def test_it_refuses_a_planted_store(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    SpanStore(path).close()
    os.chown(path, OTHER_UID, OTHER_GID)
    with pytest.raises(UntrustedPathError, match=r"store database .*: owned by uid 12345"):
        ReadOnlyStore(path)


def test_it_judges_a_session_s_receipt_as_a_full_reader_does_violations_included(tmp_path: Path) -> None:
    from otel_agentdiag.diagnostics.receipt import session_receipt

    path = tmp_path / "s" / "traces.db"
    with SpanStore(path) as writer:
        writer.write_spans([row(i) for i in range(3)])
        writer.record_violations("ingest", [("sess-a", "malformed_json", "line 2"), (None, "malformed_json", "line 9")])
    before = digest(path)
    with SpanStore(path, read_only=True) as full, ReadOnlyStore(path) as reader:
        assert reader.violation_counts() == full.violation_counts() == {"sess-a": 1, None: 1}
        assert reader.violations("sess-a") == full.violations("sess-a")
        mine, theirs = session_receipt(reader, "sess-a"), session_receipt(full, "sess-a")
        assert mine.to_json() == theirs.to_json()
        assert mine.counts["ingest_violations"] == 1 and "ingest_violation" in mine.reasons
        assert session_receipt(reader, None).to_json() == session_receipt(full, None).to_json()
    assert digest(path) == before

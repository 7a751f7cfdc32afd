"""``SpanStore(read_only=True)``: what a reader opens. It reads everything and writes nothing."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from storage_helpers import row
from test_migration_v2 import build_v1

from otel_agentdiag.storage import SpanStore, StoreError
from otel_agentdiag.storage.connection import StoreNeedsUpgrade


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_reader_reads_every_row_and_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    with SpanStore(path) as writer:
        writer.write_spans([row(i) for i in range(3)])
    before = digest(path)
    with SpanStore(path, read_only=True) as reader:
        assert reader.read_only
        assert reader.span_count() == 3
        assert [s.span_id for s in reader.session_spans("sess-a")] == [row(i).span_id for i in range(3)]
        with pytest.raises(sqlite3.OperationalError):
            reader.write_spans([row(9)])
        with pytest.raises(sqlite3.OperationalError):
            reader.clear_session("sess-a")
    assert digest(path) == before
    with SpanStore(path, create=False) as again:
        assert again.span_count() == 3


def test_a_reader_never_creates_a_store(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    with pytest.raises(StoreError):
        SpanStore(path, read_only=True)
    assert not path.exists()


def test_a_reader_leaves_an_older_store_to_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    build_v1(path)
    before = digest(path)
    with pytest.raises(StoreNeedsUpgrade):
        SpanStore(path, read_only=True)
    assert digest(path) == before

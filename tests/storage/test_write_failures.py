"""A write that fails (locked, read-only, full, file gone) raises, and leaves rows and stats exactly as they were.

Each test makes the failure real with SQLite and the file system, so it holds when the tests run as root too:
- locked: another connection holds ``BEGIN EXCLUSIVE``;
- read-only: the database header's write version is set above 2, which SQLite itself treats as read-only
  (a file mode of 0400 is tested too, where it means something: not as root);
- full: ``PRAGMA max_page_count`` at the current size (SQLITE_FULL, as on a full disk);
- gone: the store's folder is removed (or the file replaced) while the store is open.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import query, row, span_id

from otel_agentdiag.storage import Accounting, SpanStore, StoreError

OBS = "0123456789abcdef"
TABLES = ("spans", "resources", "session_stats", "observers", "sessions", "store_stats")


def snapshot(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {table: query(path, f"SELECT * FROM {table} ORDER BY 1, 2") for table in TABLES}


def batch(start: int, n: int = 5) -> list:
    return [row(i) for i in range(start, start + n)]


def accounting() -> Accounting:
    return Accounting(observer=OBS, dropped={"sess-a": {"queue_full": 2}}, flush_attempts=3)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "traces.db"


def set_write_version(path: Path, version: int) -> None:
    """Patch byte 18 of the closed database's header (2 = WAL; above 2 = read-only for SQLite)."""
    assert not Path(f"{path}-wal").exists()  # everything is checkpointed into the file
    with open(path, "r+b") as f:
        f.seek(18)
        f.write(bytes([version]))


def test_locked_database_raises_and_changes_nothing(path: Path) -> None:
    with SpanStore(path, busy_timeout=0.2) as store:
        store.write_batch(batch(0), accounting())
        before = snapshot(path)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                store.write_batch(batch(10), accounting())
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                store.record_accounting(accounting())
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                store.clear_session("sess-a")
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                store.prune()
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert snapshot(path) == before
        # The caller retries the same batch: it is written and counted once.
        assert store.write_batch(batch(10), accounting()).inserted == 5
        (stats,) = store.session_stats("sess-a")
        assert (stats.observed, stats.stored, stats.dropped) == (14, 10, {"queue_full": 4})


def test_read_only_database_raises_and_changes_nothing(path: Path) -> None:
    with SpanStore(path) as store:
        store.write_batch(batch(0), accounting())
    before = snapshot(path)
    set_write_version(path, 3)
    with SpanStore(path) as store:  # opening an up-to-date store only reads
        assert store.store_summary().span_count == 5
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.write_batch(batch(10), accounting())
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.record_accounting(accounting())
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.clear_session("sess-a")
        assert store.store_summary().span_count == 5
    assert snapshot(path) == before
    set_write_version(path, 2)
    with SpanStore(path) as store:
        assert store.write_batch(batch(10)).inserted == 5


@pytest.mark.skipif(os.geteuid() == 0, reason="file modes do not stop root from writing")
def test_read_only_file_mode_raises_and_changes_nothing(path: Path) -> None:
    with SpanStore(path) as store:
        store.write_batch(batch(0))
    before = snapshot(path)
    os.chmod(path, 0o400)
    try:
        with pytest.raises((sqlite3.OperationalError, StoreError)):
            with SpanStore(path) as store:
                store.write_batch(batch(10))
    finally:
        os.chmod(path, 0o600)
    assert snapshot(path) == before


def test_full_database_raises_and_rolls_back(path: Path) -> None:
    with SpanStore(path) as store:
        store.write_batch(batch(0), accounting())
    before = snapshot(path)
    ((pages,),) = query(path, "PRAGMA page_count")
    big = [row(i, attributes={"payload": f"{i}" * 20_000}) for i in range(100, 110)]
    with SpanStore(path, max_page_count=pages) as store:
        with pytest.raises(sqlite3.OperationalError, match="full"):
            store.write_batch(big, accounting())
        assert store.store_summary().span_count == 5
        # Still usable: the next write that needs no new page works (an accounting update in place).
        store.record_accounting(accounting())
    after = snapshot(path)
    assert after["spans"] == before["spans"]
    assert after["sessions"] == before["sessions"]
    assert after["store_stats"] == before["store_stats"]
    with SpanStore(path) as store:  # room again: the same batch goes in, counted once
        assert store.write_batch(big).inserted == 10
        (stats,) = store.session_stats("sess-a")
        assert (stats.stored, stats.dropped) == (15, {"queue_full": 4})


def test_removed_folder_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "store" / "traces.db"
    store = SpanStore(path)
    try:
        store.write_batch(batch(0))
        shutil.rmtree(path.parent)
        with pytest.raises(StoreError, match="gone"):
            store.write_batch(batch(10))
        with pytest.raises(StoreError, match="gone"):
            store.record_accounting(accounting())
        assert not path.parent.exists()  # nothing was recreated behind the caller's back
    finally:
        store.close()


def test_replaced_file_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch(batch(0))
        other = tmp_path / "other.db"
        SpanStore(other).close()
        os.replace(other, path)
        with pytest.raises(StoreError, match="replaced"):
            store.write_batch(batch(10))


def test_failure_midway_rolls_back_stats_too(path: Path) -> None:
    with SpanStore(path) as store:
        store.write_batch(batch(0), accounting())
        before = snapshot(path)
        bad = [*batch(10), replace(row(99, session="sess-b"), kind=None)]  # NOT NULL, after five inserts
        with pytest.raises(sqlite3.IntegrityError):
            store.write_batch(bad, accounting())
        assert snapshot(path) == before
        assert [s.span_id for s in store.session_spans("sess-a")] == [span_id(i) for i in range(5)]

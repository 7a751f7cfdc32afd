"""``SpanStore.prune`` applies the limits from the writer's running totals (no recount of the rows), and still
recomputes them from the rows when a check that reads no span row finds them out of step with the rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from storage_helpers import check_ledger, query, row

from otel_agentdiag.storage import PruneResult, RetentionLimits, SpanStore


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "traces.db"


def limits(**kwargs: int | None) -> RetentionLimits:
    base: dict[str, int | None] = {
        "max_session_spans": None,
        "max_session_bytes": None,
        "max_session_age_s": None,
        "max_store_bytes": None,
    }
    base.update(kwargs)
    return RetentionLimits(**base)  # type: ignore[arg-type]


def tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


def many_sessions(store: SpanStore) -> None:
    rows = [row(i, session=f"s{i % 7}" if i % 5 else None, trace_id=f"{i % 13:032x}") for i in range(140)]
    store.write_batch(rows[:70])
    store.write_batch(rows[70:])


def test_prune_keeps_exact_totals_across_sessions_and_clears(path: Path) -> None:
    with SpanStore(path, retention=limits()) as store:
        many_sessions(store)
        store.clear_session("s3", scrub=False)
        store.retention = limits(max_session_spans=9, max_store_bytes=None)
        result = store.prune()
        assert result.spans > 0
        check_ledger(path)
        per_session = dict(query(path, "SELECT coalesce(session, ''), COUNT(*) FROM spans GROUP BY 1"))
        assert max(per_session.values()) <= 9
        assert store.prune() == PruneResult()
        check_ledger(path)


def test_prune_repairs_one_sessions_bytes_and_prunes_by_the_repaired_figure(path: Path) -> None:
    with SpanStore(path, retention=limits()) as store:
        many_sessions(store)
        (size,) = query(path, "SELECT SUM(size) FROM spans WHERE session = 's1'")[0]
        # The store's totals stay right; only one session's bytes say it is empty (under any byte limit).
        tamper(path, "UPDATE sessions SET bytes = 0 WHERE session = 's1'")
        store.retention = limits(max_session_bytes=size - 1)
        result = store.prune()
        assert result.spans >= 1
        check_ledger(path)
        assert query(path, "SELECT SUM(size) FROM spans WHERE session = 's1'")[0][0] <= size - 1


def test_prune_repairs_a_store_count_out_of_step_with_the_rows(path: Path) -> None:
    with SpanStore(path, retention=limits()) as store:
        many_sessions(store)
        tamper(path, "UPDATE store_stats SET span_count = span_count + 1")
        store.prune()
        check_ledger(path)


def test_prune_recounts_a_store_without_its_totals_row(path: Path) -> None:
    with SpanStore(path, retention=limits()) as store:
        many_sessions(store)
        tamper(path, "DELETE FROM store_stats", "UPDATE sessions SET span_count = 0, bytes = 0")
        store.prune()
        check_ledger(path)

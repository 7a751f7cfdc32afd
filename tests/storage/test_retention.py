"""Retention: per-session spans/bytes/age, per-store bytes, cumulative pruned counts, under many sessions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from storage_helpers import T0, check_ledger, query, row, span_id

from otel_agentdiag.storage import PruneResult, RetentionLimits, SpanStore

NO_LIMITS = RetentionLimits(
    max_session_spans=None, max_session_bytes=None, max_session_age_s=None, max_store_bytes=None
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "traces.db"


def limits(**kwargs: float | None) -> RetentionLimits:
    base = {
        "max_session_spans": None,
        "max_session_bytes": None,
        "max_session_age_s": None,
        "max_store_bytes": None,
    }
    base.update(kwargs)
    return RetentionLimits(**base)  # type: ignore[arg-type]


def session_rows(path: Path, session: str) -> list[str]:
    return [r[0] for r in query(path, "SELECT span_id FROM spans WHERE session = ? ORDER BY start_ns", (session,))]


def pruned(path: Path) -> dict[str, tuple[int, int]]:
    return {s: (n, b) for s, n, b in query(path, "SELECT session, pruned_spans, pruned_bytes FROM sessions")}


def sizes(path: Path) -> dict[str, int]:
    return dict(query(path, "SELECT span_id, size FROM spans"))


def test_defaults_are_documented_values() -> None:
    d = RetentionLimits()
    assert (d.max_session_spans, d.max_session_bytes, d.max_store_bytes, d.max_span_bytes) == (
        10_000,
        64 * 1024 * 1024,
        1024 * 1024 * 1024,
        256 * 1024,
    )
    assert d.max_session_age_s == 30 * 24 * 3600
    doc = RetentionLimits.__doc__ or ""
    for text in ("10 000", "64 MiB", "30 days", "1 GiB", "256 KiB"):
        assert text in doc


@pytest.mark.parametrize(
    "kwargs",
    [{"max_session_spans": -1}, {"max_store_bytes": -5}, {"max_span_bytes": 0}, {"max_session_age_s": float("nan")}],
)
def test_invalid_limits_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetentionLimits(**kwargs)  # type: ignore[arg-type]


def test_session_span_limit_under_many_sessions(path: Path) -> None:
    with SpanStore(path, retention=limits(max_session_spans=5)) as store:
        total_pruned = 0
        for batch in range(6):  # 6 batches x 20 sessions x 2 spans, interleaved
            rows = [
                row(1000 * s + 2 * batch + k, session=f"s{s:02d}", trace_id=f"{s:032x}")
                for s in range(20)
                for k in range(2)
            ]
            result = store.write_batch(rows)
            assert result.inserted == 40
            total_pruned += result.pruned
            check_ledger(path)
        assert total_pruned == 20 * (12 - 5)
        for s in range(20):
            kept = session_rows(path, f"s{s:02d}")
            # The oldest went: the newest five are kept.
            assert kept == [span_id(1000 * s + i) for i in range(7, 12)]
        counts = pruned(path)
        assert {counts[f"s{s:02d}"][0] for s in range(20)} == {7}
        summary = store.store_summary()
        assert (summary.span_count, summary.pruned_spans) == (100, 140)
        assert summary.pruned_bytes == sum(b for _n, b in counts.values())


def test_session_limits_apply_to_every_session_of_a_batch_of_many_sessions(path: Path) -> None:
    """The sessions a batch touched are read in chunks (of 500): each is still pruned to its limit."""
    with SpanStore(path, retention=limits(max_session_spans=1)) as store:
        rows = [row(2 * s + k, session=f"s{s:04d}", trace_id=f"{s:032x}") for s in range(1_200) for k in range(2)]
        result = store.write_batch(rows)
        assert (result.inserted, result.pruned) == (2_400, 1_200)
        assert session_rows(path, "s0000") == [span_id(1)]
        assert session_rows(path, "s1199") == [span_id(2 * 1199 + 1)]
        check_ledger(path)


def test_session_byte_limit_prunes_oldest_until_within(path: Path) -> None:
    with SpanStore(path, retention=NO_LIMITS) as probe:
        probe.write_batch([row(0, session="probe")])
    one = next(iter(sizes(path).values()))
    path.unlink()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with SpanStore(path, retention=limits(max_session_bytes=one * 3 + one // 2)) as store:
        result = store.write_batch([row(i) for i in range(5)] + [row(10 + i, session="other") for i in range(2)])
        assert result.pruned == 2
        assert session_rows(path, "sess-a") == [span_id(i) for i in (2, 3, 4)]
        assert session_rows(path, "other") == [span_id(10), span_id(11)]
        result = store.write_batch([row(5)])
        assert result.pruned == 1
        assert session_rows(path, "sess-a") == [span_id(i) for i in (3, 4, 5)]
        assert pruned(path)["sess-a"] == (3, 3 * one)
        (summary,) = [s for s in store.list_sessions() if s.session == "sess-a"]
        assert (summary.pruned_spans, summary.bytes) == (3, 3 * one)


def test_session_age_limit_is_relative_to_the_write_time(path: Path) -> None:
    hour = 3600 * 10**9
    with SpanStore(path, retention=limits(max_session_age_s=2 * 3600)) as store:
        old = [row(i, start=-3 * hour + i) for i in range(3)]
        store.write_batch(old, now_ns=T0 - 2 * hour)  # not old yet at that time
        assert store.span_count() == 3
        result = store.write_batch([row(10, session="sess-b")], now_ns=T0)
        # All three are older than two hours now, though this batch did not touch their session.
        assert result.pruned == 3
        assert store.span_count() == 1
        assert pruned(path)["sess-a"][0] == 3
        # A span that is already too old when it arrives is counted stored, then pruned.
        result = store.write_batch([row(11, start=-5 * hour)], now_ns=T0)
        assert (result.inserted, result.pruned) == (1, 1)
        assert pruned(path)["sess-a"][0] == 4


def test_store_byte_limit_prunes_oldest_across_sessions(path: Path) -> None:
    with SpanStore(path, retention=NO_LIMITS) as probe:
        probe.write_batch([row(0, session="probe")])
    one = next(iter(sizes(path).values()))
    path.unlink()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with SpanStore(path, retention=limits(max_store_bytes=10 * one)) as store:
        for batch in range(5):
            rows = [row(100 * batch + s, session=f"s{s}", start=10 * batch + s) for s in range(4)]
            store.write_batch(rows)
            check_ledger(path)
        summary = store.store_summary()
        assert summary.total_bytes <= 10 * one
        assert (summary.span_count, summary.pruned_spans, summary.pruned_bytes) == (10, 10, 10 * one)
        kept = [r[0] for r in query(path, "SELECT span_id FROM spans ORDER BY start_ns")]
        assert kept == [span_id(100 * b + s) for b in (2, 3, 4) for s in range(4)][2:]
        assert sum(n for n, _b in pruned(path).values()) == 10


def test_pruned_counts_are_cumulative_across_writes_and_prune(path: Path) -> None:
    with SpanStore(path, retention=limits(max_session_spans=3)) as store:
        for i in range(10):
            store.write_batch([row(i)])
        assert pruned(path)["sess-a"][0] == 7
        store.retention = limits(max_session_spans=1)
        assert store.prune().spans == 2
        assert pruned(path)["sess-a"][0] == 9
        assert store.store_summary().pruned_spans == 9


def test_prune_applies_limits_to_untouched_sessions(path: Path) -> None:
    with SpanStore(path, retention=NO_LIMITS) as store:
        store.write_batch(
            [row(i, session=f"s{i % 3}") for i in range(30)] + [row(100 + i, session=None) for i in range(4)]
        )
    with SpanStore(path, retention=limits(max_session_spans=4)) as store:
        result = store.prune()
        assert result.spans == 3 * 6
        assert result.bytes == sum(pruned(path)[f"s{i}"][1] for i in range(3)) > 0
        assert store.prune() == PruneResult()
        for s in range(3):
            assert len(session_rows(path, f"s{s}")) == 4
        # Spans outside any session are a bucket of their own.
        assert query(path, "SELECT COUNT(*) FROM spans WHERE session IS NULL") == [(4,)]


def test_prune_with_nothing_to_do_changes_nothing(path: Path) -> None:
    with SpanStore(path) as store:
        store.write_batch([row(i) for i in range(3)])
        before = query(path, "SELECT * FROM spans ORDER BY rowid")
        assert store.prune() == PruneResult(spans=0, bytes=0)
    assert query(path, "SELECT * FROM spans ORDER BY rowid") == before


def test_prune_repairs_drifted_running_totals(path: Path) -> None:
    with SpanStore(path, retention=limits(max_store_bytes=10**9)) as store:
        store.write_batch([row(i) for i in range(3)])
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("UPDATE store_stats SET total_bytes = 5, span_count = 99")
        conn.execute("UPDATE sessions SET span_count = 0, bytes = 0")
        conn.close()
        store.prune()
    check_ledger(path)


def test_limits_off_keep_everything(path: Path) -> None:
    hour = 3600 * 10**9
    with SpanStore(path, retention=NO_LIMITS) as store:
        store.write_batch([row(i, start=-1000 * hour + i) for i in range(50)])
        assert store.prune() == PruneResult()
        assert store.span_count() == 50


def test_clear_keeps_running_totals_right(path: Path) -> None:
    with SpanStore(path, retention=limits(max_store_bytes=10**9)) as store:
        store.write_batch([row(i) for i in range(4)] + [row(10, session="sess-b")])
        store.clear_session("sess-a", now_ns=T0 + 100)
        check_ledger(path)
        assert store.store_summary().span_count == 1
        assert query(path, "SELECT span_count FROM store_stats") == [(1,)]

"""Memory bounded by configuration under a stalled store: the table of unwritten per-session drop counts holds at
most ``max_drop_sessions`` sessions, the rest go to one overflow row per observer, and nothing is lost (issue 22,
goal 3).

Every test writes a real SQLite store that another connection really locks (``BEGIN EXCLUSIVE``); the store's
busy timeout is 50 ms and exports happen only on ``force_flush`` (a one-hour timer), so which spans are queued
and which are dropped follows from the order the spans end in.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pipeline_support import assert_identity, digest, pipeline, run_agent, spans_of, total

from otel_agentdiag.diagnostics.receipt import session_receipt, store_receipt
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.pipeline.batching import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.ledger import DEFAULT_MAX_DROP_SESSIONS, OVERFLOW
from otel_agentdiag.storage import OVERFLOW_SESSION, SpanStore

FLUSH_MS = 60_000
STALLED = {"schedule_delay_s": 3600, "retry_backoff_s": 0.0, "max_retries": 0}


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the store's write lock from another connection (checked: a third one cannot write)."""
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        probe = sqlite3.connect(path, isolation_level=None, timeout=0)
        with pytest.raises(sqlite3.OperationalError):
            probe.execute("BEGIN IMMEDIATE")
        probe.close()
        yield
    finally:
        locker.execute("ROLLBACK")
        locker.close()


def test_the_overflow_key_is_never_a_session_digest() -> None:
    assert OVERFLOW == OVERFLOW_SESSION
    assert not OVERFLOW.startswith(("hmac-sha256:", "sha256:", "imported:")) and OVERFLOW != ""
    assert not digest().startswith(OVERFLOW)


def test_the_table_never_grows_past_its_bound_and_the_overflow_counts_exactly(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    sessions = [f"c-{i}" for i in range(60)]
    with SpanStore(path, busy_timeout=0.05) as store:
        exporter = SQLiteSpanExporter(store)
        with pipeline(exporter, max_queue_spans=8, max_drop_sessions=4, **STALLED) as pipe:
            with locked(path):
                for conversation in sessions:
                    run_agent(1, conversation)  # 4 spans; the first two runs fill the queue, the rest are dropped
                    stats = pipe.batcher.stats()
                    assert len(stats.unpersisted_dropped) <= 4 + 1  # the bound, and the overflow entry
                assert pipe.batcher.force_flush(FLUSH_MS)  # the 8 queued spans fail: export_failure
                stats = pipe.batcher.stats()
                unwritten = stats.unpersisted_dropped
                assert len(unwritten) == 5 and OVERFLOW in unwritten
                attributed = {s: sum(c.values()) for s, c in unwritten.items() if s != OVERFLOW}
                assert set(attributed) == {digest(c) for c in sessions[2:6]}  # the first four that dropped spans
                assert set(attributed.values()) == {spans_of(1)}
                # Sessions 6..59 (queue_full), then 0 and 1 (their queued spans, export_failure): no room left.
                assert unwritten[OVERFLOW] == {"queue_full": 54 * spans_of(1), "export_failure": 2 * spans_of(1)}
                assert stats.folded_spans == 56 * spans_of(1)
                assert stats.totals.observed == 60 * spans_of(1)
                assert store.span_count() == 0
            run_agent(1, "after")  # the store works again: the counts go with the next batch
            assert pipe.batcher.force_flush(FLUSH_MS)
            stats = pipe.batcher.stats()
            assert stats.unpersisted_dropped == {}
            observer = stats.observer
        assert_identity(store)
        rows = {row.session: row for row in store.session_stats()}
        overflow = rows.pop(OVERFLOW_SESSION)
        assert overflow.observer == observer
        assert (overflow.observed, overflow.accepted, overflow.stored) == (56 * spans_of(1), 0, 0)
        assert overflow.dropped == {"queue_full": 54 * spans_of(1), "export_failure": 2 * spans_of(1)}
        assert set(rows) == {digest(c) for c in sessions[2:6]} | {digest("after")}
        # Exact: each session's spans are in its own row or in the overflow, none twice, none lost.
        ended = {digest(c): spans_of(1) for c in [*sessions, "after"]}
        unfiled = sum(n - (rows[s].observed if s in rows else 0) for s, n in ended.items())
        assert unfiled == overflow.observed
        whole = total(store.session_stats())
        assert whole["observed"] == sum(ended.values()) == stats.totals.observed
        assert whole["dropped"] == stats.totals.dropped == {"queue_full": 58 * spans_of(1), "export_failure": 8}
        receipt = store_receipt(store)
        assert receipt.counts["observed"] == 61 * spans_of(1)
        assert receipt.counts["dropped"] == 60 * spans_of(1)
        assert receipt.counts["dropped_queue_full"] == 58 * spans_of(1)
        assert receipt.counts["dropped_export_failure"] == 2 * spans_of(1)
        assert {"backpressure_drop", "export_failure"} <= set(receipt.reasons)
        assert receipt.status == "degraded"


def test_a_session_whose_drops_are_in_the_overflow_gets_an_honest_receipt(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path, busy_timeout=0.05) as store:
        with pipeline(SQLiteSpanExporter(store), max_queue_spans=6, max_drop_sessions=2, **STALLED) as pipe:
            with locked(path):
                run_agent(1, "a")
                run_agent(1, "b")
                assert pipe.batcher.force_flush(FLUSH_MS)  # a and b fail: the table's two sessions
                run_agent(1, "x")  # queued whole
                run_agent(1, "y")  # its LLM and tool spans are queued; its iteration and run span are dropped
                stats = pipe.batcher.stats()
                assert stats.unpersisted_dropped[OVERFLOW] == {"queue_full": 2}
            assert pipe.batcher.force_flush(FLUSH_MS)
            observer = pipe.batcher.stats().observer

        y = session_receipt(store, digest("y"))
        assert y.counts["spans"] == 2 and y.counts["observed"] == 2 and y.counts["dropped"] == 0
        assert y.reasons == ["backpressure_drop"] and y.status == "degraded"  # its drops may be in the overflow
        assert y.unattributed_drops == {observer: 2}
        # Its missing numbers (the run and iteration spans) may be those drops: neither a gap nor unfinished.
        assert y.counts["sequence_gaps"] == 0 and y.counts["unfinished_spans"] == 0
        assert y.to_json()["unattributed_drops"] == {observer: 2}

        # A complete session of that observer cannot be vouched for either: its later spans may be there too.
        x = session_receipt(store, digest("x"))
        assert x.counts["spans"] == 4 and x.counts["dropped"] == 0
        assert x.status == "degraded" and x.reasons == ["backpressure_drop"] and x.unattributed_drops == {observer: 2}
        # A session whose drops are in its own row says so under their own reason, and names the overflow too.
        a = session_receipt(store, digest("a"))
        assert a.counts["dropped_export_failure"] == spans_of(1) and "export_failure" in a.reasons
        # A session the store knows nothing of: any observer's overflow may hold it.
        unknown = session_receipt(store, digest("never-seen"))
        assert unknown.status == "invalid" and unknown.unattributed_drops == {observer: 2}

        whole = store_receipt(store)
        assert whole.counts["observed"] == 4 * spans_of(1)
        assert whole.counts["dropped"] == 2 * spans_of(1) + 2
        assert whole.counts["dropped_queue_full"] == 2 + 2 and whole.counts["dropped_export_failure"] == 6
        assert "unattributed_drops" not in whole.to_json()  # the store's counts include the overflow row itself


def test_without_an_overflow_receipts_are_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path, busy_timeout=0.05) as store:
        with pipeline(SQLiteSpanExporter(store), max_queue_spans=6, max_drop_sessions=2, **STALLED) as pipe:
            run_agent(1, "a")
            assert pipe.batcher.force_flush(FLUSH_MS)
        receipt = session_receipt(store, digest("a"))
        assert receipt.status == "valid" and receipt.unattributed_drops == {}
        assert set(receipt.to_json()) == {"session", "status", "reasons", "counts", "observers", "provenance"}


def test_the_bound_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = InMemorySpanExporter()  # no span is ended: only the bound is read
    monkeypatch.setenv("AGENTDIAG_MAX_DROP_SESSIONS", "7")
    processor = AccountingBatchSpanProcessor(exporter)
    explicit = AccountingBatchSpanProcessor(exporter, max_drop_sessions=3)
    monkeypatch.setenv("AGENTDIAG_MAX_DROP_SESSIONS", "zero")
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        fallback = AccountingBatchSpanProcessor(exporter)
    try:
        assert processor.stats().max_drop_sessions == 7
        assert explicit.stats().max_drop_sessions == 3
        assert fallback.stats().max_drop_sessions == DEFAULT_MAX_DROP_SESSIONS
        assert any("AGENTDIAG_MAX_DROP_SESSIONS" in r.getMessage() for r in caplog.records)
        with pytest.raises(ValueError):
            AccountingBatchSpanProcessor(exporter, max_drop_sessions=0)
    finally:
        for p in (processor, explicit, fallback):
            p.shutdown(timeout_s=1)

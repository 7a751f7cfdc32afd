"""AccountingBatchSpanProcessor against real SQLite stores: every span's fate is counted, nothing silently lost."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from pipeline_support import (
    CONVERSATION,
    FlakyExporter,
    GatedExporter,
    assert_identity,
    digest,
    expected_results,
    pipeline,
    run_agent,
    spans_of,
    total,
)

from otel_agentdiag import semconv as sc
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor, SessionSequencer, estimate_size
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.rules import Callback, HashedId
from otel_agentdiag.storage import SpanStore

NEVER = 3600.0
"""A schedule delay no test waits for: batches then go out only when full or on flush."""


@pytest.fixture
def store(tmp_path: Path):
    with SpanStore(tmp_path / "traces.db", busy_timeout=0.05) as s:
        yield s


def _spans(tracer, n: int, conversation: str = CONVERSATION, **attributes) -> None:
    for i in range(n):
        attrs = {sc.GEN_AI_CONVERSATION_ID: conversation, **attributes}
        with tracer.start_as_current_span(f"span-{i}", attributes=attrs):
            pass


def test_forced_overflow_drops_exactly_what_the_store_counts(store: SpanStore) -> None:
    exporter = GatedExporter(store)
    with pipeline(exporter, policy=None, max_queue_spans=4, max_export_batch=2, schedule_delay_s=NEVER) as pipe:
        tracer = pipe.tracer()
        _spans(tracer, 2)  # a full batch: the worker takes both and blocks in the exporter
        assert exporter.waiting.wait(30)
        _spans(tracer, 10)  # 4 fit in the queue, 6 do not
        stats = pipe.batcher.stats()
        assert stats.totals.dropped == {"queue_full": 6}
        assert (stats.queue_depth, stats.in_flight, stats.peak_queue) == (4, 2, 4)
        assert stats.totals.observed == 12 and stats.totals.pending == 6
        exporter.gate.set()
        assert pipe.batcher.force_flush(30_000)
        stats = pipe.batcher.stats()
        assert (stats.totals.accepted, stats.totals.pending) == (6, 0)
        assert stats.unpersisted_dropped == {}  # the drops went to the store with the next batch

    (row,) = store.session_stats()
    assert row.session == CONVERSATION  # no redaction in this pipeline: the raw id is the session
    assert (row.observed, row.accepted, row.stored, row.dropped) == (12, 6, 6, {"queue_full": 6})
    assert store.span_count() == 6
    # The six spans the queue refused are exactly the six missing sequence numbers.
    sequences = sorted(s.sequence for s in store.session_spans(CONVERSATION))
    assert sequences == [0, 1, 2, 3, 4, 5]
    (observer,) = store.observers()
    assert (observer.observer, observer.peak_queue, observer.queue_limit) == (pipe.sequencer.observer_id, 4, 4)
    assert_identity(store)


def test_the_queue_is_bounded_in_bytes_too(store: SpanStore) -> None:
    big = "x" * 10_000
    one = estimate_size({sc.GEN_AI_CONVERSATION_ID: CONVERSATION, "payload": big, "agentdiag.observer.id": "0" * 16})
    exporter = GatedExporter(store)
    with pipeline(
        exporter, policy=None, max_export_batch=1, max_queue_bytes=int(one * 2.5), schedule_delay_s=NEVER
    ) as pipe:
        tracer = pipe.tracer()
        _spans(tracer, 1, payload=big)
        assert exporter.waiting.wait(30)
        _spans(tracer, 5, payload=big)  # two fit in 2.5 spans' worth of bytes
        _spans(tracer, 3)  # small spans still fit beside them
        stats = pipe.batcher.stats()
        assert stats.totals.dropped == {"queue_full": 3}
        assert stats.queue_depth == 5 and stats.queue_bytes <= stats.max_queue_bytes
        exporter.gate.set()
        assert pipe.batcher.force_flush(30_000)
    assert total(store.session_stats())["dropped"] == {"queue_full": 3}
    assert store.span_count() == 6
    assert_identity(store)


@pytest.mark.parametrize("raise_instead", [False, True])
def test_a_failed_batch_is_retried_and_then_written(store: SpanStore, raise_instead: bool) -> None:
    exporter = FlakyExporter(store, failures=3, raise_instead=raise_instead)
    with pipeline(exporter, policy=None, schedule_delay_s=NEVER, retry_backoff_s=0.001) as pipe:
        _spans(pipe.tracer(), 5)
        assert pipe.batcher.force_flush(30_000)
        stats = pipe.batcher.stats()
    assert exporter.calls == 4
    assert (stats.flush_attempts, stats.flush_failures) == (4, 3)
    assert stats.totals.accepted == 5 and stats.totals.dropped == {}
    (row,) = store.session_stats()
    assert (row.observed, row.accepted, row.dropped) == (5, 5, {})
    (observer,) = store.observers()
    assert (observer.flush_attempts, observer.flush_failures) >= (4, 3)
    assert_identity(store)


def test_retries_exhausted_count_export_failure_and_the_worker_goes_on(
    store: SpanStore, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = FlakyExporter(store, failures=4, raise_instead=True)
    with pipeline(exporter, policy=None, schedule_delay_s=NEVER, retry_backoff_s=0.001, max_retries=3) as pipe:
        _spans(pipe.tracer(), 5)
        assert pipe.batcher.force_flush(30_000)
        stats = pipe.batcher.stats()
        assert stats.totals.dropped == {"export_failure": 5}
        # The flush wrote the counts alone (no span could be written): the store knows what it lost.
        assert stats.unpersisted_dropped == {}
        assert store.span_count() == 0
        (row,) = store.session_stats()
        assert (row.observed, row.stored, row.dropped) == (5, 0, {"export_failure": 5})
        # The same worker exports the next batch.
        _spans(pipe.tracer(), 2, conversation="other")
        assert pipe.batcher.force_flush(30_000)
    assert exporter.calls == 5
    by_session = {row.session: row for row in store.session_stats()}
    assert (by_session[CONVERSATION].observed, by_session[CONVERSATION].dropped) == (5, {"export_failure": 5})
    assert (by_session["other"].observed, by_session["other"].accepted) == (2, 2)
    assert sorted(s.sequence for s in store.session_spans(CONVERSATION)) == []
    assert_identity(store)
    assert any("could not be exported after 4 attempts" in r.getMessage() for r in caplog.records)


def test_shutdown_is_bounded_when_the_exporter_hangs(store: SpanStore) -> None:
    exporter = GatedExporter(store)
    batcher = AccountingBatchSpanProcessor(exporter, max_export_batch=2, schedule_delay_s=NEVER)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SessionSequencer())
    provider.add_span_processor(batcher)
    tracer = provider.get_tracer("t")
    _spans(tracer, 2)
    assert exporter.waiting.wait(30)
    _spans(tracer, 3)
    assert not batcher.force_flush(50)  # cannot finish while the exporter hangs

    done = threading.Event()
    stopper = threading.Thread(target=lambda: (batcher.shutdown(timeout_s=0.2), done.set()))
    stopper.start()
    stopper.join(30)
    assert done.is_set(), "shutdown did not return while the exporter hung"
    _spans(tracer, 1)  # after shutdown: refused, and counted
    stats = batcher.stats()
    assert stats.totals.dropped == {"shutdown": 6}  # 2 in the stuck exporter, 3 queued, 1 late
    assert (stats.totals.observed, stats.totals.accepted, stats.totals.pending) == (6, 0, 0)

    # The stuck write finishes later: it is not counted twice, and the worker ends.
    exporter.gate.set()
    assert exporter.returned.wait(30)
    batcher._worker.join(30)
    assert not batcher._worker.is_alive()
    assert batcher.stats().totals == stats.totals
    provider.shutdown()


@pytest.mark.parametrize("in_worker", [True, False], ids=["redact-in-worker", "redact-on-end"])
def test_force_flush_writes_pending_counts_without_spans(tmp_path: Path, in_worker: bool) -> None:
    broken = Policy(
        name="broken",
        allowed_keys={
            "explode": Callback(lambda value: 1 / 0, "explode"),
            sc.GEN_AI_CONVERSATION_ID: HashedId("conversation"),
            sc.AGENTDIAG_OBSERVER_ID: LOCAL.allowed_keys[sc.AGENTDIAG_OBSERVER_ID],
            sc.AGENTDIAG_SEQUENCE: LOCAL.allowed_keys[sc.AGENTDIAG_SEQUENCE],
        },
        on_error="drop",
    )
    with SpanStore(tmp_path / "t.db") as store:
        with pipeline(
            SQLiteSpanExporter(store), policy=broken, redact_in_worker=in_worker, schedule_delay_s=NEVER
        ) as pipe:
            _spans(pipe.tracer(), 3, explode="boom")  # the redactor fails: nothing is forwarded
            _spans(pipe.tracer(), 2)
            assert pipe.batcher.force_flush(30_000)
            assert pipe.redacting is not None and pipe.redacting.dropped == 3
            stats = pipe.batcher.stats()
            session = digest()
            assert stats.sessions[session].rejected == {"redactor_error": 3}
            assert (stats.sessions[session].observed, stats.sessions[session].accepted) == (5, 2)
        (row,) = store.session_stats()
        assert row.session == session
        assert (row.observed, row.accepted, row.stored, row.rejected) == (5, 2, 2, {"redactor_error": 3})
        assert_identity(store)


def test_rejections_alone_reach_the_store_on_flush(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "t.db") as store:
        batcher = AccountingBatchSpanProcessor(SQLiteSpanExporter(store), schedule_delay_s=NEVER)
        batcher.record_rejected("session-a", "redactor_error")
        batcher.record_rejected(None, "redactor_error")
        assert batcher.force_flush(30_000)
        rows = {row.session: row for row in store.session_stats()}
        assert {s: (r.observed, r.rejected) for s, r in rows.items()} == {
            "session-a": (1, {"redactor_error": 1}),
            None: (1, {"redactor_error": 1}),
        }
        assert batcher.stats().unpersisted_rejected == {}
        batcher.shutdown()
        assert_identity(store)


@pytest.mark.parametrize("in_worker", [True, False], ids=["redact-in-worker", "redact-on-end"])
def test_a_tombstone_counts_as_rejected_in_memory_and_in_the_store(tmp_path: Path, in_worker: bool) -> None:
    broken = LOCAL.derive("tombstones", allowed_keys={"explode": Callback(lambda value: 1 / 0, "explode")})
    with SpanStore(tmp_path / "t.db") as store:
        with pipeline(
            SQLiteSpanExporter(store), policy=broken, redact_in_worker=in_worker, schedule_delay_s=NEVER
        ) as pipe:
            _spans(pipe.tracer(), 1, explode="boom")
            _spans(pipe.tracer(), 1)
            assert pipe.batcher.force_flush(30_000)
            totals = pipe.batcher.stats().totals
        assert (totals.observed, totals.accepted, totals.rejected) == (2, 1, {"redactor_error": 1})
        # The tombstone keeps its place in the books (session digest, observer, sequence), nothing else: the
        # session's own row counts it as rejected, next to the span that went through.
        (row,) = store.session_stats()
        assert row.session == digest()
        assert (row.observed, row.accepted, row.rejected, row.stored) == (2, 1, {"redactor_error": 1}, 2)
        tombstone = next(s for s in store.session_spans(digest()) if s.name == "agentdiag.redaction_error")
        assert tombstone.sequence is not None and tombstone.observer == pipe.batcher.observer_id
        assert "boom" not in str(tombstone.attributes)
        assert_identity(store)


def test_any_exporter_gets_a_ledger_but_no_pending_deltas() -> None:
    memory = InMemorySpanExporter()
    batcher = AccountingBatchSpanProcessor(memory, max_queue_spans=2, max_export_batch=100, schedule_delay_s=NEVER)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(batcher)
    _spans(provider.get_tracer("t"), 5)  # the worker waits for a full batch: 2 queued, 3 dropped
    assert batcher.force_flush(30_000)
    stats = batcher.stats()
    assert len(memory.get_finished_spans()) == 2
    assert (stats.totals.observed, stats.totals.accepted, stats.totals.dropped) == (5, 2, {"queue_full": 3})
    assert stats.unpersisted_dropped == {}  # nothing to persist them to: not kept
    provider.shutdown()


def test_unsampled_spans_are_neither_numbered_nor_counted(store: SpanStore) -> None:
    class RecordOnly(Sampler):
        def should_sample(self, *args, **kwargs) -> SamplingResult:
            return SamplingResult(Decision.RECORD_ONLY)

        def get_description(self) -> str:
            return "record-only"

    sequencer = SessionSequencer()
    batcher = AccountingBatchSpanProcessor(SQLiteSpanExporter(store), observer=sequencer, schedule_delay_s=NEVER)
    provider = TracerProvider(sampler=RecordOnly(), shutdown_on_exit=False)
    provider.add_span_processor(sequencer)
    provider.add_span_processor(batcher)
    with provider.get_tracer("t").start_as_current_span("recorded, not sampled") as span:
        assert span.is_recording()
    assert sc.AGENTDIAG_SEQUENCE not in span.attributes
    assert batcher.force_flush(30_000)
    assert batcher.stats().totals.observed == 0
    provider.shutdown()
    assert store.span_count() == 0


def test_many_threads_many_sessions_no_gap_no_duplicate(store: SpanStore) -> None:
    with pipeline(SQLiteSpanExporter(store), policy=None, max_export_batch=64) as pipe:
        tracer = pipe.tracer()

        def work(index: int) -> None:
            for i in range(150):
                _spans(tracer, 1, conversation=f"session-{(index + i) % 3}")

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert pipe.batcher.force_flush(30_000)
    rows = store.session_stats()
    assert total(rows)["observed"] == total(rows)["stored"] == 900
    for row in rows:
        sequences = sorted(s.sequence for s in store.session_spans(row.session))
        assert sequences == list(range(row.stored))
    assert_identity(store)


def test_the_pipeline_stats_identity_holds_per_session(store: SpanStore) -> None:
    exporter = GatedExporter(store)
    with pipeline(exporter, max_queue_spans=5, max_export_batch=4, schedule_delay_s=NEVER) as pipe:
        results = run_agent(3)  # 10 spans: up to 4 in the stuck exporter, up to 5 queued, the rest dropped
        assert results == expected_results(3)
        assert exporter.waiting.wait(30)
        stats = pipe.batcher.stats()
        counts = stats.sessions[digest()]
        assert counts.observed == spans_of(3)
        assert counts.pending == stats.queue_depth + stats.in_flight > 0
        assert counts.accepted == 0 and counts.rejected == {}
        assert counts.dropped == {"queue_full": spans_of(3) - counts.pending}
        exporter.gate.set()
        assert pipe.batcher.force_flush(30_000)
        assert pipe.batcher.stats().sessions[digest()].pending == 0
    assert_identity(store)


def test_bad_settings_raise_value_error(store: SpanStore) -> None:
    exporter = SQLiteSpanExporter(store)
    for bad in ({"max_queue_spans": 0}, {"max_export_batch": 0}, {"schedule_delay_s": 0}, {"max_retries": -1}):
        with pytest.raises(ValueError):
            AccountingBatchSpanProcessor(exporter, **bad)


def test_size_estimate_counts_strings_and_has_a_floor() -> None:
    empty = estimate_size({})
    assert empty > 0
    assert estimate_size({"k": "x" * 1000}) >= empty + 1000
    assert estimate_size({"k": ("a" * 100, "b" * 100)}) >= empty + 200
    assert estimate_size({"k": 12345}) < estimate_size({"k": "12345" * 10})


def test_export_result_of_a_plain_exporter_is_honoured() -> None:
    class Refusing(InMemorySpanExporter):
        def export(self, spans):
            super().export(spans)
            return SpanExportResult.FAILURE

    exporter = Refusing()
    batcher = AccountingBatchSpanProcessor(exporter, max_retries=2, retry_backoff_s=0.001, schedule_delay_s=NEVER)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(batcher)
    _spans(provider.get_tracer("t"), 3)
    assert batcher.force_flush(30_000)
    stats = batcher.stats()
    assert (stats.flush_attempts, stats.flush_failures) == (3, 3)
    assert stats.totals.dropped == {"export_failure": 3}
    provider.shutdown()


def test_on_end_never_raises_even_when_counting_fails(store: SpanStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    batcher = AccountingBatchSpanProcessor(SQLiteSpanExporter(store), schedule_delay_s=NEVER)
    batcher.on_end(object())  # type: ignore[arg-type] - not a span at all
    batcher.record_rejected(["not", "hashable"], "redactor_error")  # type: ignore[arg-type]
    assert any("the agent is unaffected" in r.getMessage() for r in caplog.records)
    batcher.shutdown()

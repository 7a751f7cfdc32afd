"""The pipeline configure() builds: one sequencer first, an accounting batch processor per destination."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from pipeline_support import HASH_KEY, assert_identity, digest, expected_results, run_agent, spans_of

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.adapters import ConventionAdapter
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.redaction.rules import Callback
from otel_agentdiag.storage import RetentionLimits, SpanStore


def test_every_stored_span_is_numbered_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False) as diag:
        assert [type(x) for x in diag.batch_processors] == [AccountingBatchSpanProcessor]
        # Redaction runs in the batch worker, as its second stage: adapters, redaction (metrics off), then export.
        assert [type(x) for x in diag.batch_processors[0]._stages] == [ConventionAdapter, RedactionStage]
        assert diag.processors[0].stage is diag.batch_processors[0]._stages[1]
        assert diag.batch_processors[0].exports_only_redacted
        assert run_agent(3) == expected_results(3)
        assert run_agent(1, "c-2") == expected_results(1)
        assert diag.force_flush()
        stats = diag.stats()
    observer = diag.observer_id
    assert observer is not None and stats["observer"] == observer
    local = stats["destinations"]["local"]
    assert local["redaction"] == {"redacted": spans_of(3) + spans_of(1), "failed": 0, "tombstoned": 0, "dropped": 0}
    pipeline = local["pipeline"]
    assert pipeline["observer"] == observer
    assert pipeline["totals"] == {
        "observed": spans_of(4) + 1,
        "accepted": spans_of(4) + 1,
        "rejected": {},
        "dropped": {},
        "pending": 0,
    }
    assert set(pipeline["sessions"]) == {digest(), digest("c-2")}
    with SpanStore(path, create=False) as store:
        for conversation, steps in (("conversation-1", 3), ("c-2", 1)):
            spans = store.session_spans(digest(conversation))
            assert {s.observer for s in spans} == {observer}
            assert sorted(s.sequence for s in spans) == list(range(spans_of(steps)))
            # The run started first: it is number 0 of its session.
            assert next(s.sequence for s in spans if s.kind == sc.KIND_RUN) == 0
        assert [o.observer for o in store.observers()] == [observer]
        assert_identity(store)


def test_retention_is_passed_to_the_store(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    limits = RetentionLimits(max_session_spans=4)
    with agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False, retention=limits) as diag:
        assert run_agent(3) == expected_results(3)
        assert diag.force_flush()
    with SpanStore(path, create=False) as store:
        assert len(store.session_spans(digest())) == 4
        assert store.list_sessions()[0].pruned_spans == spans_of(3) - 4
    with pytest.raises(ValueError):
        agentdiag.configure(store=path, set_global=False, retention={"max_session_spans": 4})  # type: ignore[arg-type]


def test_spans_the_redactor_drops_are_counted_in_their_session(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    exploding = LOCAL.derive(
        "exploding", allowed_keys={"app.explode": Callback(lambda value: 1 / 0, "explode")}, on_error="drop"
    )
    with agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False, local_policy=exploding) as diag:
        tracer = diag.tracer_provider.get_tracer("t")  # type: ignore[union-attr]
        with agentdiag.agent_run("pipeline-agent", conversation_id="conversation-1"):
            with tracer.start_as_current_span("bad", attributes={"app.explode": "x"}):
                pass
        assert diag.force_flush()
    with SpanStore(path, create=False) as store:
        (row,) = store.session_stats()
        assert row.session == digest()
        assert (row.observed, row.accepted, row.rejected) == (2, 1, {"redactor_error": 1})
        # The lost span left a visible gap: the run is 0, the rejected span was 1.
        assert [s.sequence for s in store.session_spans(digest())] == [0]
        assert_identity(store)


def test_shutdown_is_bounded_while_the_store_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    diag = agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False)
    batcher = diag.batch_processors[0]
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        assert run_agent(2) == expected_results(2)
        done = threading.Event()
        stopper = threading.Thread(target=lambda: (diag.shutdown(timeout_s=0.3), done.set()))
        stopper.start()
        stopper.join(30)
        # configure()'s busy timeout is 5 s per attempt and 4 attempts: shutdown did not wait for them.
        assert done.is_set()
        totals = batcher.stats().totals
        assert (totals.observed, totals.dropped) == (spans_of(2), {"shutdown": spans_of(2)})
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    batcher._worker.join(30)  # the write under way when shutdown gave up finishes on its own
    assert not batcher._worker.is_alive()
    assert batcher.stats().totals == totals  # and is not counted twice

"""Redaction on the batch worker (a ``RedactionStage`` among the batch processor's stages, what ``configure()`` builds).

The agent's thread only queues the span as it ended; the worker redacts it just before export. These tests
prove the three things that move with it: where the work runs, that no exporter ever sees a raw span (also
when redaction fails or the pipeline shuts down mid-way), and that the books still balance under digests.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pipeline_support import (
    CONVERSATION,
    HASH_KEY,
    GatedExporter,
    assert_identity,
    digest,
    pipeline,
    run_agent,
    spans_of,
)

from otel_agentdiag import semconv as sc
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.redaction.rules import Callback
from otel_agentdiag.storage import SpanStore

NEVER = 3600.0
SENTINEL = "raw-sentinel-7f3a"


def _threads_seen() -> tuple[Policy, list[str]]:
    """A policy whose ``app.probe`` rule records the thread that applies it (and keeps nothing)."""
    seen: list[str] = []

    def probe(value: object) -> None:
        seen.append(threading.current_thread().name)
        return None

    return LOCAL.derive("probe", allowed_keys={"app.probe": Callback(probe, "probe")}), seen


def test_redaction_runs_on_the_worker_not_on_the_ending_thread(tmp_path: Path) -> None:
    policy, seen = _threads_seen()
    with SpanStore(tmp_path / "t.db") as store:
        with pipeline(SQLiteSpanExporter(store), policy=policy, schedule_delay_s=NEVER) as pipe:
            tracer = pipe.tracer()
            for _ in range(3):
                tracer.start_span("step", attributes={"app.probe": "x"}).end()
            assert seen == []  # ended, queued, not redacted yet
            assert pipe.redacting is not None and pipe.redacting.redacted == 0
            assert pipe.batcher.force_flush(30_000)
            assert seen == ["AgentDiagBatchSpanProcessor"] * 3
            assert pipe.redacting.redacted == 3
        assert store.span_count() == 3


def test_redaction_on_end_stays_available(tmp_path: Path) -> None:
    policy, seen = _threads_seen()
    with SpanStore(tmp_path / "t.db") as store:
        with pipeline(SQLiteSpanExporter(store), policy=policy, redact_in_worker=False, schedule_delay_s=NEVER) as pipe:
            pipe.tracer().start_span("step", attributes={"app.probe": "x"}).end()
            assert seen == [threading.current_thread().name]


def test_the_exporter_only_ever_sees_redacted_spans(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    with pipeline(memory, policy=STRICT, schedule_delay_s=NEVER) as pipe:
        assert len(run_agent(2, conversation=SENTINEL)) == 2
        pipe.tracer().start_span("step", attributes={"app.secret": SENTINEL, "user.id": SENTINEL}).end()
        assert pipe.batcher.force_flush(30_000)
    spans = memory.get_finished_spans()
    assert len(spans) == spans_of(2) + 1
    assert SENTINEL not in repr([(s.name, dict(s.attributes or {}), s.events) for s in spans])
    run_span = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert run_span.attributes is not None
    assert run_span.attributes[sc.GEN_AI_CONVERSATION_ID] == digest(SENTINEL)


@pytest.mark.parametrize("on_error", ["drop", "tombstone"])
def test_a_failed_redaction_on_the_worker_fails_closed_and_is_counted(tmp_path: Path, on_error: str) -> None:
    broken = LOCAL.derive(
        "broken", allowed_keys={"explode": Callback(lambda value: 1 / 0, "explode")}, on_error=on_error
    )
    with SpanStore(tmp_path / "t.db") as store:
        with pipeline(SQLiteSpanExporter(store), policy=broken, schedule_delay_s=NEVER) as pipe:
            tracer = pipe.tracer()
            with tracer.start_as_current_span("agent.iteration", attributes={sc.GEN_AI_CONVERSATION_ID: CONVERSATION}):
                pass
            tracer.start_span("bad", attributes={sc.GEN_AI_CONVERSATION_ID: CONVERSATION, "explode": SENTINEL}).end()
            assert pipe.batcher.force_flush(30_000)
            session = pipe.batcher.stats().sessions[digest()]
            assert (session.observed, session.accepted, session.rejected) == (2, 1, {"redactor_error": 1})
            redacting = pipe.redacting
            assert redacting is not None
            assert (redacting.redacted, redacting.failed) == (1, 1)
            assert (redacting.tombstoned, redacting.dropped) == ((1, 0) if on_error == "tombstone" else (0, 1))
        names = sorted(s.name for s in store.session_spans(digest()))
        assert names == (
            ["agent.iteration", "agentdiag.redaction_error"] if on_error == "tombstone" else ["agent.iteration"]
        )
        assert SENTINEL.encode() not in (tmp_path / "t.db").read_bytes()
        assert_identity(store)


def test_spans_abandoned_at_shutdown_are_filed_under_their_digest(tmp_path: Path) -> None:
    """Spans still queued when shutdown gives up were never redacted: they are counted under the session digest
    the store would have used, never under the raw id."""
    with SpanStore(tmp_path / "t.db") as store:
        exporter = GatedExporter(store)
        with pipeline(exporter, max_export_batch=2, schedule_delay_s=NEVER) as pipe:
            tracer = pipe.tracer()
            for _ in range(2):
                tracer.start_span("first", attributes={sc.GEN_AI_CONVERSATION_ID: CONVERSATION}).end()
            assert exporter.waiting.wait(30)  # the worker holds the first (redacted) batch in the exporter
            tracer.start_span("queued", attributes={sc.GEN_AI_CONVERSATION_ID: CONVERSATION}).end()
            pending = pipe.batcher.stats()
            assert set(pending.sessions) == {digest()}
            assert pending.sessions[digest()].pending == 3
            pipe.batcher.shutdown(timeout_s=0.1)
            stats = pipe.batcher.stats()
            assert set(stats.sessions) == {digest()}
            assert stats.sessions[digest()].dropped == {"shutdown": 3}
            exporter.gate.set()
            assert exporter.returned.wait(30)


def test_redact_in_worker_is_deprecated_and_the_processor_redacts_as_spans_end() -> None:
    """The argument of the removed worker mode is still accepted: same policy, same outcome, on the ending thread."""
    memory = InMemorySpanExporter()
    with pytest.warns(DeprecationWarning, match="redact_in_worker"):
        redacting = RedactingSpanProcessor(
            BatchSpanProcessor(memory), policy=STRICT, hasher=IdHasher(HASH_KEY), redact_in_worker=True
        )
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(redacting)
    provider.get_tracer("t").start_span("s", attributes={"app.secret": SENTINEL}).end()
    assert redacting.redacted == 1  # redacted before the span was queued
    provider.shutdown()
    (span,) = memory.get_finished_spans()
    assert SENTINEL not in repr(dict(span.attributes or {}))


def test_only_a_batch_processor_with_a_redaction_stage_counts_as_redacting() -> None:
    plain = AccountingBatchSpanProcessor(InMemorySpanExporter(), schedule_delay_s=NEVER)
    stage = RedactionStage(STRICT, hasher=IdHasher(HASH_KEY))
    redacting = AccountingBatchSpanProcessor(
        InMemorySpanExporter(), stages=[stage], session_of=stage.session_of, schedule_delay_s=NEVER
    )
    try:
        assert not plain.exports_only_redacted
        assert redacting.exports_only_redacted
    finally:
        plain.shutdown()
        redacting.shutdown()

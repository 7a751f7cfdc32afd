"""The worker's batch-at-once paths give what the span-at-a-time ones gave.

``RedactingSpanProcessor.finish_batch`` (one call and one counter lock per batch) against ``finish_span`` per
span, including failures in the middle of a batch; a finisher whose batch call breaks its contract; the ledger
counting a batch per session against a ledger fed one span at a time (with and without evictions); and
``span_to_row`` reading the SDK span's slots against the property path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode
from pipeline_support import HASH_KEY, assert_identity, digest, pipeline

from otel_agentdiag import semconv as sc
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter, span_to_row
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.ledger import Ledger
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction import policy as p
from otel_agentdiag.storage import SpanStore

NEVER = 3600.0
SENTINEL = "raw-sentinel-5d1c"


def _raw_spans() -> list[ReadableSpan]:
    """Ended SDK spans of several shapes: GenAI attributes, unknown keys, events, links, an error status, and
    every fourth one carrying a value the ``explode`` rule fails on."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "finish-tests"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("finish-tests", "1.0")
    for i in range(24):
        attributes: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: "chat",
            sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
            sc.GEN_AI_CONVERSATION_ID: f"conversation-{i % 3}",
            "user.id": f"user-{i}@example.com",
            "gen_ai.usage.input_tokens": i * 7,
            "app.unknown": SENTINEL,
        }
        if i % 4 == 3:
            attributes["explode"] = SENTINEL
        links = [Link(tracer.start_span("linked").get_span_context(), {"app.k": "v"})] if i % 5 == 0 else []
        span = tracer.start_span(f"chat {i}", attributes=attributes, links=links)
        if i % 3 == 0:
            span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_MESSAGE: f"boom {SENTINEL}", "exception.type": "E"})
            span.set_status(Status(StatusCode.ERROR, f"failed {SENTINEL}"))
        span.end()
    provider.shutdown()
    return [span for span in memory.get_finished_spans() if span.name != "linked"]


def _redacting(on_error: str) -> RedactingSpanProcessor:
    policy = p.LOCAL.derive(
        "explosive", allowed_keys={"explode": p.Callback(lambda value: 1 / 0, "explode")}, on_error=on_error
    )
    return RedactingSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), policy=policy, hasher=IdHasher(HASH_KEY))


def _counters(processor: RedactingSpanProcessor) -> tuple[int, int, int, int]:
    return processor.redacted, processor.failed, processor.tombstoned, processor.dropped


@pytest.mark.parametrize("on_error", ["drop", "tombstone"])
def test_finish_batch_gives_what_finish_span_gives_span_by_span(on_error: str) -> None:
    spans = _raw_spans()
    one_by_one, batched = _redacting(on_error), _redacting(on_error)
    expected = [one_by_one.finish_span(span) for span in spans]
    got = batched.finish_batch(spans)
    assert len(got) == len(expected) == len(spans)
    for mine, theirs in zip(got, expected, strict=True):
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert mine.to_json() == theirs.to_json()
            assert span_to_row(mine) == span_to_row(theirs)
            assert SENTINEL not in mine.to_json()
    assert _counters(batched) == _counters(one_by_one)
    failed = sum(1 for span in spans if "explode" in (span.attributes or {}))
    assert batched.failed == failed > 0
    assert batched.redacted == len(spans) - failed
    assert batched.drift_report() == one_by_one.drift_report()


class _BrokenBatches:
    """A finisher whose batch call breaks its contract (raises, or answers for fewer spans); ``finish_span``
    is a redactor's, except that it raises for spans named ``refuse``."""

    def __init__(self, redacting: RedactingSpanProcessor, mode: str) -> None:
        self.redacting = redacting
        self.mode = mode

    def finish_batch(self, spans: list[ReadableSpan]) -> list[ReadableSpan | None]:
        if self.mode == "raise":
            raise RuntimeError("broken batch")
        return [self.redacting.finish_span(span) for span in spans[1:]]

    def finish_span(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.name == "refuse":
            raise RuntimeError("broken span")
        return self.redacting.finish_span(span)

    def session_of(self, span: ReadableSpan) -> str | None:
        return self.redacting.session_of(span)


@pytest.mark.parametrize("mode", ["raise", "short"])
def test_a_batch_call_that_breaks_its_contract_still_finishes_or_counts_every_span(tmp_path: Path, mode: str) -> None:
    with SpanStore(tmp_path / "t.db") as store:
        batcher = AccountingBatchSpanProcessor(SQLiteSpanExporter(store), schedule_delay_s=NEVER)
        redacting = RedactingSpanProcessor(
            SimpleSpanProcessor(InMemorySpanExporter()), policy=p.LOCAL, hasher=IdHasher(HASH_KEY)
        )
        batcher.set_finisher(_BrokenBatches(redacting, mode))
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(batcher)
        tracer = provider.get_tracer("t")
        for name in ("a", "refuse", "b", "c"):
            tracer.start_span(name, attributes={sc.GEN_AI_CONVERSATION_ID: "conversation-1"}).end()
        assert batcher.force_flush(30_000)
        session = batcher.stats().sessions[digest()]
        assert (session.observed, session.accepted, session.rejected) == (4, 3, {"redactor_error": 1})
        assert sorted(s.name for s in store.session_spans(digest())) == [sc.OTHER_VALUE] * 3
        assert store.span_count() == 3
        assert_identity(store)
        batcher.shutdown()
        provider.shutdown()


@pytest.mark.parametrize("max_sessions", [3, 1000])
def test_a_batch_is_counted_as_one_span_at_a_time_would_be(tmp_path: Path, max_sessions: int) -> None:
    """Sessions interleaved in one batch: with room in the ledger the batch is counted per session at once, with
    too little (evictions) span by span; either way the same counts, order and evictions as span by span."""
    conversations = [f"conversation-{i % 7}" for i in range(40)] + ["conversation-0"] * 3
    expected = Ledger(max_sessions)
    for conversation in conversations:
        expected.observe(digest(conversation))
        expected.accept(digest(conversation))
    with SpanStore(tmp_path / "t.db") as store:
        with pipeline(
            SQLiteSpanExporter(store), schedule_delay_s=NEVER, max_ledger_sessions=max_sessions, max_export_batch=512
        ) as pipe:
            tracer = pipe.tracer()
            for conversation in conversations:
                tracer.start_span("step", attributes={sc.GEN_AI_CONVERSATION_ID: conversation}).end()
            assert pipe.batcher.force_flush(30_000)
            stats = pipe.batcher.stats()
    assert [(s, c.as_dict()) for s, c in stats.sessions.items()] == [
        (s, c.as_dict()) for s, c in expected.sessions.items()
    ]
    assert stats.evicted_sessions == expected.evicted_sessions
    assert stats.totals.as_dict() == expected.totals.as_dict()


class _OtherSpan(ReadableSpan):
    """Not one of the SDK's own span classes: ``span_to_row`` reads it through its properties."""


def test_span_to_row_reads_the_same_from_slots_and_from_properties() -> None:
    redacting = _redacting("tombstone")
    for span in _raw_spans():
        for source in (span, redacting.finish_span(span)):
            assert source is not None
            other = _OtherSpan(
                name=source.name,
                context=source.context,
                parent=source.parent,
                resource=source.resource,
                attributes=source.attributes,
                events=source.events,
                links=source.links,
                kind=source.kind,
                status=source.status,
                start_time=source.start_time,
                end_time=source.end_time,
                instrumentation_scope=source.instrumentation_scope,
            )
            assert span_to_row(source) == span_to_row(other)
            if "explode" not in (source.attributes or {}):
                assert redacting.redactor.redact(other).to_json() == redacting.redactor.redact(source).to_json()

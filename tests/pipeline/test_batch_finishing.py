"""The worker's batch-at-once paths give what the span-at-a-time ones gave.

``RedactionStage.process`` (one call and one counter lock per batch) against the synchronous
``RedactingSpanProcessor`` span by span, including failures in the middle of a batch; a stage that breaks its
contract; the ledger counting a batch per session against a ledger fed one span at a time (with and without
evictions); and ``span_to_row`` reading the SDK span's slots against the property path.
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
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.redaction.rules import Callback
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


def _explosive(on_error: str) -> Policy:
    return LOCAL.derive(
        "explosive", allowed_keys={"explode": Callback(lambda value: 1 / 0, "explode")}, on_error=on_error
    )


def _redacting(on_error: str) -> RedactionStage:
    return RedactionStage(_explosive(on_error), hasher=IdHasher(HASH_KEY))


def _counters(stage: RedactionStage) -> tuple[int, int, int, int]:
    return stage.redacted, stage.failed, stage.tombstoned, stage.dropped


@pytest.mark.parametrize("on_error", ["drop", "tombstone"])
def test_a_batch_through_the_stage_gives_what_the_processor_gives_span_by_span(on_error: str) -> None:
    spans = _raw_spans()
    forwarded = InMemorySpanExporter()
    one_by_one = RedactingSpanProcessor(
        SimpleSpanProcessor(forwarded), policy=_explosive(on_error), hasher=IdHasher(HASH_KEY)
    )
    for span in spans:
        one_by_one.on_end(span)
    batched = _redacting(on_error)
    got, rejected = batched.process(spans)
    expected = forwarded.get_finished_spans()
    assert len(got) == len(expected) and len(got) + len(rejected) == len(spans)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.to_json() == theirs.to_json()
        assert span_to_row(mine) == span_to_row(theirs)
        assert SENTINEL not in mine.to_json()
    assert _counters(batched) == _counters(one_by_one)
    failed = sum(1 for span in spans if "explode" in (span.attributes or {}))
    assert batched.failed == failed > 0
    assert batched.redacted == len(spans) - failed
    assert rejected == (
        []
        if on_error == "tombstone"
        else [(digest(f"conversation-{i % 3}"), "redactor_error") for i in range(3, 24, 4)]
    )
    assert batched.drift_report() == one_by_one.drift_report()


class _BrokenStage:
    """A stage that breaks its contract: it raises, or answers for fewer spans than it was given."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[tuple[str | None, str]]]:
        if self.mode == "raise":
            raise RuntimeError("broken stage")
        return spans[1:], []


@pytest.mark.parametrize("mode", ["raise", "short"])
def test_a_stage_that_breaks_its_contract_has_its_batch_rejected_and_counted(tmp_path: Path, mode: str) -> None:
    """Fail closed: a batch a stage may have left half-done never reaches the exporter; every span of it is
    counted as rejected under its session, so the books still balance."""
    with SpanStore(tmp_path / "t.db") as store:
        redaction = _redacting("drop")
        batcher = AccountingBatchSpanProcessor(
            SQLiteSpanExporter(store),
            stages=[_BrokenStage(mode), redaction],
            session_of=redaction.session_of,
            schedule_delay_s=NEVER,
        )
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(batcher)
        tracer = provider.get_tracer("t")
        for name in ("a", "b", "c"):
            tracer.start_span(name, attributes={sc.GEN_AI_CONVERSATION_ID: "conversation-1"}).end()
        assert batcher.force_flush(30_000)
        session = batcher.stats().sessions[digest()]
        assert (session.observed, session.accepted, session.rejected) == (3, 0, {"redactor_error": 3})
        assert store.span_count() == 0
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
        for source in (span, redacting.redact(span)[0]):
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

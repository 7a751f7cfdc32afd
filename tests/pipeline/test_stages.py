"""The batch worker's stages, in order, and the accounting identity through stages that reject and drop.

A real ``AccountingBatchSpanProcessor`` with its ordered stages (convention adapter, redaction, a stage that
rejects), a real SQLite store behind an exporter that fails its first write, a queue small enough to overflow:
per session, ``observed = accepted + rejected + dropped + pending`` in memory, and in the store once written.
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from pipeline_support import HASH_KEY, FlakyExporter, assert_identity, digest

from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.adapters import ConventionAdapter
from otel_agentdiag.pipeline.worker import span_session
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.redaction.rules import Callback
from otel_agentdiag.storage import SpanStore

NEVER = 3600.0
CONVERSATION = "conversation-1"


class _RejectNamed:
    """A stage after the redactor that rejects the spans of one (redacted) name, filed under their session."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[str] = []

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[tuple[str | None, str]]]:
        self.seen.extend(span.name for span in spans)
        kept = [span for span in spans if span.name != self.name]
        return kept, [(span_session(span), "redactor_error") for span in spans if span.name == self.name]


def _identity(counts: object) -> bool:
    observed = counts.observed  # type: ignore[attr-defined]
    rejected = sum(counts.rejected.values())  # type: ignore[attr-defined]
    dropped = sum(counts.dropped.values())  # type: ignore[attr-defined]
    return bool(observed == counts.accepted + rejected + dropped + counts.pending)  # type: ignore[attr-defined]


def test_stages_that_reject_and_drops_keep_the_identity_in_memory_and_in_the_store(tmp_path: Path) -> None:
    policy = LOCAL.derive("explosive", allowed_keys={"explode": Callback(lambda v: 1 / 0, "explode")}, on_error="drop")
    redaction = RedactionStage(policy, hasher=IdHasher(HASH_KEY))
    rejecting = _RejectNamed("agent.iteration")
    with SpanStore(tmp_path / "t.db") as store:
        exporter = FlakyExporter(store, failures=1)  # the first write fails: an export failure (no retries)
        batcher = AccountingBatchSpanProcessor(
            exporter,
            stages=[ConventionAdapter(), redaction, rejecting],
            session_of=redaction.session_of,
            max_queue_spans=4,
            max_retries=0,
            schedule_delay_s=NEVER,
        )
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(batcher)
        tracer = provider.get_tracer("stages")
        session = {sc.GEN_AI_CONVERSATION_ID: CONVERSATION}

        def end(name: str, **extra: str) -> None:
            tracer.start_span(name, attributes={**session, **extra}).end()

        # First batch: two plain spans, one the redactor cannot rebuild, one the last stage rejects; a fifth span
        # finds the queue full.
        end("step")
        end("step", explode="boom")
        end("agent.iteration")
        end("step")
        end("step")  # queue_full
        pending = batcher.stats().sessions[digest()]
        assert (pending.observed, pending.pending, pending.dropped) == (5, 4, {"queue_full": 1})
        assert _identity(pending)
        assert batcher.force_flush(30_000)  # two spans reach the exporter, which fails them
        first = batcher.stats().sessions[digest()]
        assert (first.accepted, first.rejected) == (0, {"redactor_error": 2})
        assert first.dropped == {"queue_full": 1, "export_failure": 2}
        assert _identity(first) and first.pending == 0
        # The stages ran in order: the redactor had already removed the span it could not rebuild.
        assert rejecting.seen == [sc.OTHER_VALUE, "agent.iteration", sc.OTHER_VALUE]

        # Second batch: written, with the counts that waited for a write.
        end("step")
        end("step")
        assert batcher.force_flush(30_000)
        done = batcher.stats().sessions[digest()]
        assert (done.observed, done.accepted, done.pending) == (7, 2, 0)
        assert _identity(done)
        batcher.shutdown()
        provider.shutdown()

        (row,) = store.session_stats()
        assert row.session == digest()
        assert (row.observed, row.accepted, row.stored) == (7, 2, 2)
        assert row.rejected == {"redactor_error": 2}
        assert row.dropped == {"queue_full": 1, "export_failure": 2}
        assert_identity(store)
        assert b"boom" not in (tmp_path / "t.db").read_bytes()

"""Shared pieces of the pipeline tests: a scripted agent, a hand-built pipeline, exporters that wait on purpose.

Everything here is real: the SDK's TracerProvider, the real processors, SQLite files. The two exporter
subclasses are test doubles only in *when* they write (they wait for an event, or fail a set number of
calls the way a broken database does); the writing itself is SQLiteSpanExporter's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor, SessionSequencer
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.storage import Accounting, SessionStats, SpanStore

HASH_KEY = b"cacdd15bd6c55241b0003f4f73bddf041e243f691a4c87763a9ba63d11c9df20"
CONVERSATION = "conversation-1"


@agentdiag.tool("lookup")
def lookup(i: int) -> str:
    return f"result-{i}"


def run_agent(steps: int, conversation: str = CONVERSATION) -> list[str]:
    """An agent run of ``steps`` iterations (an LLM call and a tool call each): ``1 + 3 * steps`` spans."""
    results = []
    with agentdiag.agent_run("pipeline-agent", conversation_id=conversation):
        for i in range(steps):
            with agentdiag.iteration(i):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(input_tokens=12, output_tokens=3, finish_reasons=["tool_calls"])
                results.append(lookup(i))
    return results


def expected_results(steps: int) -> list[str]:
    return [f"result-{i}" for i in range(steps)]


def spans_of(steps: int) -> int:
    return 1 + 3 * steps


def digest(conversation: str = CONVERSATION, key: bytes = HASH_KEY) -> str:
    """The session digest the store files ``conversation`` under."""
    return IdHasher(key).digest("conversation", conversation)


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (a deadline, not a sleep to synchronise)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.01)
    return True


def total(stats: Sequence[SessionStats]) -> dict[str, Any]:
    """Sum of session_stats rows: observed, accepted, stored, duplicates, rejected and dropped by cause."""
    out: dict[str, Any] = {"observed": 0, "accepted": 0, "stored": 0, "duplicates": 0, "rejected": {}, "dropped": {}}
    for row in stats:
        for name in ("observed", "accepted", "stored", "duplicates"):
            out[name] += getattr(row, name)
        for name in ("rejected", "dropped"):
            for reason, n in getattr(row, name).items():
                out[name][reason] = out[name].get(reason, 0) + n
    return out


def assert_identity(store: SpanStore) -> None:
    """``observed = accepted + rejected + dropped`` on every stats row of the store."""
    rows = store.session_stats()
    assert rows, "no stats rows"
    for row in rows:
        assert row.observed == row.accepted + sum(row.rejected.values()) + sum(row.dropped.values()), row


class GatedExporter(SQLiteSpanExporter):
    """SQLiteSpanExporter that waits for ``gate`` before each write, and signals ``waiting`` when it does."""

    def __init__(self, store: Any, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.returned = threading.Event()
        self.calls = 0

    def export_with_accounting(self, spans: Sequence[ReadableSpan], accounting: Accounting | None) -> bool:
        self.calls += 1
        self.waiting.set()
        self.gate.wait()
        try:
            return super().export_with_accounting(spans, accounting)
        finally:
            self.returned.set()


class FlakyExporter(SQLiteSpanExporter):
    """SQLiteSpanExporter whose first ``failures`` calls fail before touching the store (False, or raise)."""

    def __init__(self, store: Any, failures: int, *, raise_instead: bool = False, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self.failures = failures
        self.raise_instead = raise_instead
        self.calls = 0

    def export_with_accounting(self, spans: Sequence[ReadableSpan], accounting: Accounting | None) -> bool:
        self.calls += 1
        if self.calls <= self.failures:
            if self.raise_instead:
                raise RuntimeError("exporter bug")
            return False
        return super().export_with_accounting(spans, accounting)


@dataclass
class Pipeline:
    provider: TracerProvider
    sequencer: SessionSequencer
    batcher: AccountingBatchSpanProcessor
    redacting: RedactionStage | None
    """The redaction: the batch worker's stage, or the synchronous processor (a stage too) in front of it."""

    def tracer(self) -> Any:
        return self.provider.get_tracer("pipeline-tests")


@contextmanager
def pipeline(
    exporter: SpanExporter, *, policy: Policy | None = LOCAL, redact_in_worker: bool = True, **batch_options: Any
) -> Iterator[Pipeline]:
    """The pipeline ``configure()`` builds, by hand: sequencer, batching with a redaction stage on its worker
    (``policy=None``: none).

    ``redact_in_worker=False`` redacts on the thread that ends the span instead (a ``RedactingSpanProcessor`` in
    front of the batch processor, as a chain of the user's own does).

    The manual wrappers trace into it for the duration of the block; it is shut down on exit.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": "pipeline-tests"}), shutdown_on_exit=False)
    sequencer = SessionSequencer()
    provider.add_span_processor(sequencer)
    redacting: RedactionStage | None = None
    if policy is not None and redact_in_worker:
        redacting = RedactionStage(policy, hasher=IdHasher(HASH_KEY))
        batcher = AccountingBatchSpanProcessor(
            exporter, stages=[redacting], session_of=redacting.session_of, observer=sequencer, **batch_options
        )
        provider.add_span_processor(batcher)
    else:
        batcher = AccountingBatchSpanProcessor(exporter, observer=sequencer, **batch_options)
        if policy is None:
            provider.add_span_processor(batcher)
        else:
            redacting = RedactingSpanProcessor(batcher, policy=policy, hasher=IdHasher(HASH_KEY))
            provider.add_span_processor(redacting)
    manual.use_tracer_provider(provider)
    try:
        yield Pipeline(provider, sequencer, batcher, redacting)
    finally:
        manual.use_tracer_provider(None)
        batcher.shutdown(timeout_s=10)
        provider.shutdown()

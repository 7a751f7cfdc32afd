"""The OTLP branch's one-attempt policy stays on its own thread: anyone else's SDK OTLP exporter keeps its retries
and its log lines."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.config import OTLP_DESTINATION, AgentDiag

HASH_KEY = "5f0a9bfb7740e2f5ce64d9ee6a8875283bc78032bd5c2ff8e65a69a50376460f"


def closed_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def diag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentDiag]:
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        monkeypatch.delenv(variable, raising=False)
    handle = agentdiag.configure(
        store=tmp_path / "t.db", otlp_endpoint=closed_endpoint(), hash_key=HASH_KEY, set_global=False
    )
    yield handle
    handle.shutdown(timeout_s=0.5)


def test_another_otlp_exporter_keeps_its_own_retries_and_lines(
    diag: AgentDiag, caplog: pytest.LogCaptureFixture
) -> None:
    assert OTLP_DESTINATION in [d.name for d in diag.destinations]
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    provider.get_tracer("test").start_span("s").end()
    theirs = OTLPSpanExporter(endpoint=closed_endpoint() + "/v1/traces", timeout=1.5)
    with caplog.at_level(logging.WARNING):
        result = theirs.export(spans.get_finished_spans())
    theirs.shutdown()
    assert result is SpanExportResult.FAILURE
    assert any(r.getMessage().startswith("Transient error") for r in caplog.records)  # theirs retried, and said so


def test_a_dead_collector_is_an_export_failure_even_at_a_short_shutdown(diag: AgentDiag) -> None:
    assert diag.tracer_provider is not None
    tracer = diag.tracer_provider.get_tracer("test")
    for index in range(5):
        with tracer.start_as_current_span(f"span {index}"):
            pass
    local, otlp = diag.batch_processors
    assert local.force_flush()
    diag.shutdown(timeout_s=1.0)  # shorter than the SDK's first backoffs together (1 + 2 s)

    totals = otlp.stats().totals
    assert (totals.observed, totals.accepted, totals.dropped) == (5, 0, {"export_failure": 5})
    assert otlp.stats().flush_attempts >= 1
    assert local.stats().totals.accepted == 5

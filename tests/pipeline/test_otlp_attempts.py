"""The OTLP branch's exporter makes one attempt per call; the batch processor retries, counts and gives up.

Through the SDK's public API only: the exporter is built with a timeout under the SDK's first backoff
(``exporters/otlp.py``), so the SDK never retries in place. A real loopback HTTP server that answers 503 (a status
the SDK retries) counts the requests; anyone else's SDK OTLP exporter keeps its own retries and log lines.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.destinations import OTLP_DESTINATION
from otel_agentdiag.exporters import otlp
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.handle import AgentDiag

HASH_KEY = "5f0a9bfb7740e2f5ce64d9ee6a8875283bc78032bd5c2ff8e65a69a50376460f"
_TIMEOUTS = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")


def closed_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


class _Unavailable(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.requests += 1  # type: ignore[attr-defined]
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def unavailable() -> Iterator[ThreadingHTTPServer]:
    """A collector that is up and answers 503 Service Unavailable (retryable, no Retry-After) to every export."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    server.requests = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _spans(n: int = 1) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for index in range(n):
        provider.get_tracer("test").start_span(f"s{index}").end()
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def no_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in _TIMEOUTS:
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.usefixtures("no_timeout")
def test_the_timeout_is_one_attempts_worth_within_the_configured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert otlp.export_timeout_s() == 10.0
    assert otlp.one_attempt_timeout_s() == otlp.ONE_ATTEMPT_S < 0.8  # under the SDK's shortest first backoff
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.25")
    assert otlp.one_attempt_timeout_s() == 0.25
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "not a number")
    assert otlp.export_timeout_s() == 0.25


@pytest.mark.usefixtures("no_timeout")
def test_one_export_call_is_one_attempt(unavailable: ThreadingHTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    endpoint = f"http://127.0.0.1:{unavailable.server_address[1]}"
    exporter = otlp.otlp_span_exporter(endpoint, timeout=otlp.one_attempt_timeout_s())
    with caplog.at_level(logging.WARNING):
        result = exporter.export(_spans())
    exporter.shutdown()
    assert result is SpanExportResult.FAILURE
    assert unavailable.requests == 1  # type: ignore[attr-defined]
    assert not any(r.getMessage().startswith("Transient error") for r in caplog.records)  # no retry in place


@pytest.mark.usefixtures("no_timeout")
def test_the_batch_processor_retries_each_attempt_and_counts_them(unavailable: ThreadingHTTPServer) -> None:
    endpoint = f"http://127.0.0.1:{unavailable.server_address[1]}"
    exporter = otlp.otlp_span_exporter(endpoint, timeout=otlp.one_attempt_timeout_s())
    batcher = AccountingBatchSpanProcessor(exporter, max_retries=2, retry_backoff_s=0.001, schedule_delay_s=3600)
    try:
        for span in _spans(3):
            batcher.enqueue(span)
        assert batcher.force_flush(30_000)
        stats = batcher.stats()
    finally:
        batcher.shutdown()
    assert unavailable.requests == 3  # type: ignore[attr-defined]  # 1 + max_retries, each one SDK attempt
    assert (stats.flush_attempts, stats.flush_failures) == (3, 3)
    assert (stats.totals.observed, stats.totals.dropped) == (3, {"export_failure": 3})


@pytest.mark.usefixtures("no_timeout")
def test_a_grpc_export_call_is_one_attempt_too(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    exporter = otlp.otlp_span_exporter(closed_endpoint(), otlp.GRPC, timeout=otlp.one_attempt_timeout_s())
    with caplog.at_level(logging.WARNING):
        result = exporter.export(_spans())
    exporter.shutdown()
    assert result is SpanExportResult.FAILURE
    assert not any(r.getMessage().startswith("Transient error") for r in caplog.records)


@pytest.fixture
def diag(tmp_path: Path, no_timeout: None) -> Iterator[AgentDiag]:
    handle = agentdiag.configure(
        store=tmp_path / "t.db", otlp_endpoint=closed_endpoint(), hash_key=HASH_KEY, set_global=False
    )
    yield handle
    handle.shutdown(timeout_s=0.5)


def test_another_otlp_exporter_keeps_its_own_retries_and_lines(
    diag: AgentDiag, caplog: pytest.LogCaptureFixture
) -> None:
    assert OTLP_DESTINATION in [d.name for d in diag.destinations]
    theirs = OTLPSpanExporter(endpoint=closed_endpoint() + "/v1/traces", timeout=1.5)
    with caplog.at_level(logging.WARNING):
        result = theirs.export(_spans())
    theirs.shutdown()
    assert result is SpanExportResult.FAILURE
    assert any(r.getMessage().startswith("Transient error") for r in caplog.records)  # theirs retried, and said so


def test_a_dead_collector_is_an_export_failure_even_at_a_short_shutdown(diag: AgentDiag) -> None:
    assert diag.tracer_provider is not None
    tracer = diag.tracer_provider.get_tracer("test")
    for index in range(5):
        with tracer.start_as_current_span(f"span {index}"):
            pass
    local, otlp_branch = diag.batch_processors
    assert local.force_flush()
    diag.shutdown(timeout_s=1.0)  # shorter than the retries' backoff together (1 + 2 + 4 s)

    totals = otlp_branch.stats().totals
    assert (totals.observed, totals.accepted, totals.dropped) == (5, 0, {"export_failure": 5})
    assert otlp_branch.stats().flush_attempts >= 1
    assert local.stats().totals.accepted == 5

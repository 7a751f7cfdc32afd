"""Fixtures for the client instrumentations: one concern each.

* ``server``: the fake model server on 127.0.0.1 (one per module, reset before each test).
* ``spans``: a fresh SDK tracer provider whose finished spans land in memory, and whose ``on_start`` records
  the attributes each span *started* with (sampling-relevant attributes must be there at start). Correlation
  ids are never attributes: ``Spans.ids(span)`` reads the raw ones kept beside the span for our redactors.
* ``openai_instrumented`` / ``anthropic_instrumented``: the instrumentor on that provider, removed afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fakes.openai_server import FakeModelServer
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agentdiag.testing import CorrelationIdsProcessor, correlation_ids


class _StartRecorder(SpanProcessor):
    def __init__(self) -> None:
        self.started: dict[int, dict[str, Any]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started[span.context.span_id] = dict(span.attributes or {})

    def on_end(self, span: ReadableSpan) -> None:
        pass


@dataclass
class Spans:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    starts: _StartRecorder

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def llm(self) -> list[ReadableSpan]:
        """Finished spans marked ``agentdiag.kind=llm``."""
        return [s for s in self.finished() if (s.attributes or {}).get("agentdiag.kind") == "llm"]

    def one(self) -> ReadableSpan:
        spans = self.finished()
        assert len(spans) == 1, [s.name for s in spans]
        return spans[0]

    @staticmethod
    def ids(span: ReadableSpan) -> dict[str, Any]:
        """The raw correlation ids kept beside ``span`` for our redactors (never among its attributes)."""
        return correlation_ids(span)

    def started_with(self, span: ReadableSpan) -> dict[str, Any]:
        assert span.context is not None
        return self.starts.started[span.context.span_id]


@pytest.fixture
def anyio_backend() -> str:
    """``async def`` tests run under anyio's pytest plugin (anyio ships with both SDKs), on asyncio."""
    return "asyncio"


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def server(_server: FakeModelServer) -> FakeModelServer:
    _server.reset()
    return _server


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    starts = _StartRecorder()
    provider = TracerProvider()
    provider.add_span_processor(CorrelationIdsProcessor())  # as the pipeline's first processor: ids readable
    provider.add_span_processor(starts)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Spans(provider, exporter, starts)
    gc.collect()  # end any stream a test left behind while its provider is still alive
    provider.shutdown()


@pytest.fixture
def openai_instrumented(spans: Spans) -> Iterator[None]:
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=spans.provider)
    yield
    OpenAIInstrumentor().uninstrument()


@pytest.fixture
def anthropic_instrumented(spans: Spans) -> Iterator[None]:
    from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument(tracer_provider=spans.provider)
    yield
    AnthropicInstrumentor().uninstrument()

"""``foreign_processors()`` names what sees spans before redaction; ``redacting_processor()`` is the fix.

Real SDK providers, processors and exporters; the OTLP exporters point at endpoints that hold a secret in
their URL and headers, which must never appear in a report or a log line.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import ProxyTracerProvider

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor, SessionSequencer, foreign_processors
from otel_agentdiag.redaction import IdHasher, PolicyError
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.testing import CorrelationIdsProcessor

SECRET = "SECRET-token-7d1e"
SECRET_URL = f"https://user:{SECRET}@collector.example:4318/v1/traces?api_key={SECRET}"

KEY = bytes.fromhex("56f3dba923a244fa9c3d0e64b2e5e6617d0e9bcc64906e700b448687543eb64c")
TEXT_KEY = secrets.token_hex(32)
OTLP_TEXT_KEY = secrets.token_hex(32)
WRAP_KEY = bytes.fromhex("06db2c0f106e61b62c5541b7e8d26b67087cf363655731f993c84b7b38e2486d")


class VendorProcessor(SpanProcessor):
    """A vendor SDK's processor: exports somewhere, exposes no exporter."""

    def __init__(self) -> None:
        self.api_key = SECRET


def _names(provider: TracerProvider) -> list[str]:
    return [str(found) for found in foreign_processors(provider)]


def test_every_processor_that_is_not_ours_is_named_by_class_only(tmp_path: Path) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=SECRET_URL, headers={"x-key": SECRET})))
    diag = agentdiag.configure(store=tmp_path / "t.db", tracer_provider=provider, set_global=False)
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    provider.add_span_processor(VendorProcessor())
    provider.add_span_processor(agentdiag.redacting_processor(InMemorySpanExporter(), hash_key=KEY))
    try:
        found = diag.foreign_processors()
        assert [str(f) for f in found] == [
            "BatchSpanProcessor(OTLPSpanExporter)",
            "SimpleSpanProcessor(ConsoleSpanExporter)",
            "VendorProcessor",
        ]
        assert found[0].as_dict() == {
            "processor": "opentelemetry.sdk.trace.export.BatchSpanProcessor",
            "exporter": "opentelemetry.exporter.otlp.proto.http.trace_exporter.OTLPSpanExporter",
        }
        assert found[2].exporter is None
        assert SECRET not in repr(found) and "collector.example" not in repr(found)
        assert agentdiag.foreign_processors(provider) == found  # the same check, by provider
    finally:
        diag.shutdown()
        provider.shutdown()


def test_nested_multi_processors_are_walked() -> None:
    provider = TracerProvider(shutdown_on_exit=False, active_span_processor=ConcurrentMultiSpanProcessor(2))
    inner = ConcurrentMultiSpanProcessor(1)
    inner.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    inner.add_span_processor(SessionSequencer())  # ours, exports nothing
    provider.add_span_processor(inner)
    provider.add_span_processor(CorrelationIdsProcessor())
    assert _names(provider) == ["SimpleSpanProcessor(InMemorySpanExporter)"]
    provider.shutdown()


def test_our_batch_processor_without_a_redactor_exports_raw_spans_and_is_named() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    raw = AccountingBatchSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(raw)
    assert _names(provider) == ["AccountingBatchSpanProcessor(InMemorySpanExporter)"]
    provider.shutdown()
    raw.shutdown()


def test_no_sdk_provider_no_report() -> None:
    assert foreign_processors(ProxyTracerProvider()) == []
    assert foreign_processors(object()) == []


def test_configure_warns_once_per_foreign_processor_it_finds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=SECRET_URL)))
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        diag = agentdiag.configure(store=tmp_path / "t.db", tracer_provider=provider, set_global=False)
    diag.shutdown()
    provider.shutdown()
    warnings = [r.getMessage() for r in caplog.records if "before redaction" in r.getMessage()]
    assert len(warnings) == 1
    assert "BatchSpanProcessor(OTLPSpanExporter)" in warnings[0] and "redacting_processor" in warnings[0]
    assert SECRET not in caplog.text and "collector.example" not in caplog.text


def test_configure_on_its_own_provider_warns_about_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        diag = agentdiag.configure(store=tmp_path / "t.db", set_global=False)
    assert diag.foreign_processors() == []
    diag.shutdown()
    assert "before redaction" not in caplog.text


# -- redacting_processor(): the documented way to put an exporter of the user's under our policy ------------
def _run_into(processor: SpanProcessor) -> InMemorySpanExporter:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    manual.use_tracer_provider(provider)
    try:
        with agentdiag.agent_run("wrap-agent", conversation_id="conv-w", user_id="alice@example.com"):
            with provider.get_tracer("their.library").start_as_current_span(
                "their.span", attributes={"http.url": f"https://api.example/?token={SECRET}", "prompt": SECRET}
            ):
                pass
    finally:
        manual.use_tracer_provider(None)
    provider.shutdown()
    return processor._next.exporter  # type: ignore[attr-defined, no-any-return]


def test_the_wrapped_exporter_receives_only_strictly_redacted_spans() -> None:
    exporter = InMemorySpanExporter()
    processor = agentdiag.redacting_processor(exporter, hash_key=WRAP_KEY)
    assert processor.policy is STRICT
    assert _run_into(processor) is exporter
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent wrap-agent", sc.OTHER_VALUE}
    h = IdHasher(WRAP_KEY)
    run, theirs = spans["invoke_agent wrap-agent"], spans[sc.OTHER_VALUE]
    assert run.attributes[sc.USER_ID] == h.digest("user", "alice@example.com")
    assert theirs.attributes[sc.GEN_AI_CONVERSATION_ID] == h.digest("conversation", "conv-w")  # propagated
    dump = "".join(s.to_json() for s in exporter.get_finished_spans())
    assert SECRET not in dump and "alice@example.com" not in dump and "conv-w" not in dump
    assert processor.redacted == 2
    assert exporter._stopped  # shutting the processor down shut the exporter down


def test_the_default_key_is_the_one_configure_gives_its_otlp_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cases = [
        ({"AGENTDIAG_OTLP_HASH_KEY": OTLP_TEXT_KEY, "AGENTDIAG_HASH_KEY": TEXT_KEY}, OTLP_TEXT_KEY.encode()),
        ({"AGENTDIAG_HASH_KEY": TEXT_KEY}, TEXT_KEY.encode()),
    ]
    for variables, key in cases:
        for name in ("AGENTDIAG_OTLP_HASH_KEY", "AGENTDIAG_HASH_KEY"):
            monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        exporter = _run_into(agentdiag.redacting_processor(InMemorySpanExporter()))
        (run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
        assert run.attributes[sc.GEN_AI_CONVERSATION_ID] == IdHasher(key).digest("conversation", "conv-w")
    monkeypatch.delenv("AGENTDIAG_HASH_KEY")
    exporter = _run_into(agentdiag.redacting_processor(InMemorySpanExporter()))
    key_file = tmp_path / ".agentdiag" / "hash.key"
    assert key_file.stat().st_mode & 0o777 == 0o600  # created as configure() creates it
    (run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert run.attributes[sc.GEN_AI_CONVERSATION_ID] == IdHasher(key_file.read_bytes()).digest("conversation", "conv-w")


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="SpanExporter"):
        agentdiag.redacting_processor(object(), hash_key=KEY)  # type: ignore[arg-type]
    debug = LOCAL.derive("debugging", summary="debug")
    with pytest.raises(PolicyError, match="local store only"):
        agentdiag.redacting_processor(InMemorySpanExporter(), policy=debug, hash_key=KEY)
    with pytest.raises(PolicyError):
        agentdiag.redacting_processor(InMemorySpanExporter(), policy=42, hash_key=KEY)  # type: ignore[arg-type]

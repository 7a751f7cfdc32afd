"""End to end: data written into attribute keys, finish reasons and schema URLs never leaves, on any path.

One real pipeline (``configure()`` on our own provider, a SQLite store and a real OTLP/HTTP receiver on
127.0.0.1) records an agent whose spans carry keys that carry data under every family the presets used to
allow with a ``*`` (``gen_ai.usage.customer_<card number>``, ``telemetry.sdk.<e-mail>``, ...), finish reasons
no provider documents, a resource schema URL on a look-alike host and one instrumentation scope per hostile
schema URL. The tests then search every file of the store (``-wal`` and ``-shm`` included, while the writer
still has it open and after it closed) and every OTLP request body, byte for byte, and check what the
receiver parsed: dropped keys counted as ``unknown_key``, ``_OTHER`` in place of each unknown reason, no schema
URL but OpenTelemetry's. ``agentdiag export`` (every format) re-validates rows an older version stored, and
``agentdiag ingest`` applies the same checks to imported OTLP-JSON.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hostile_vocabulary import (
    DATA_FINISH_REASONS,
    DATA_SEGMENTS,
    HOSTILE_SCHEMA_URLS,
    OTEL_SCHEMA_URLS,
    RESOURCE_FAMILIES,
    SCHEMA_URL_MARKERS,
    SPAN_FAMILIES,
    data_keys,
)
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.storage import SpanStore

HASH_KEY = "bb7443c1f4649d87ddd5fc93c8109eab467bed02d74eec22808ffb481eb60a20"
WAIT_S = 10.0
AGENT = "vocab-agent"
REDACTION = sc.AGENTDIAG_REDACTION_PREFIX
OTEL_SCHEMA = OTEL_SCHEMA_URLS[0]
RESOURCE_SCHEMA = "https://opentelemetry.io.evil.example/schemas/1.37.0"
HOSTILE_SPAN_KEYS = data_keys(SPAN_FAMILIES)
HOSTILE_RESOURCE_KEYS = data_keys(RESOURCE_FAMILIES)
REASONS = ("stop", *DATA_FINISH_REASONS, "length")
MARKERS = tuple(dict.fromkeys(DATA_SEGMENTS + DATA_FINISH_REASONS + SCHEMA_URL_MARKERS))
"""Byte strings that appear in no store file or OTLP body unless something leaked."""


@dataclass
class Run:
    store_path: Path
    files_while_open: dict[str, bytes]
    files_after: dict[str, bytes] = field(default_factory=dict)
    received: list[ReceivedSpan] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def _leaks(blob: bytes) -> list[str]:
    return [marker for marker in MARKERS if marker.encode() in blob or marker.lower().encode() in blob.lower()]


CHUNK = 100
"""Hostile keys per span: the SDK keeps at most 128 attributes on a span (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT)."""
CHUNKS = [HOSTILE_SPAN_KEYS[start : start + CHUNK] for start in range(0, len(HOSTILE_SPAN_KEYS), CHUNK)]


def _agent(provider: TracerProvider) -> None:
    with agentdiag.agent_run(AGENT, conversation_id="conv-closed-vocab"):
        # The data-carrying keys, on iteration spans (few attributes of their own).
        for index, chunk in enumerate(CHUNKS):
            with agentdiag.iteration(index):
                span = trace.get_current_span()
                for key in chunk:
                    span.set_attribute(key, 4111)
        with agentdiag.iteration(len(CHUNKS)):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                span = trace.get_current_span()
                span.set_attribute("llm.token_count.total", 15)
                span.set_attribute("llm.finish_reason", "jane_doe")
                span.set_attribute(sc.GEN_AI_USAGE_PREFIX + "customer_4111111111111111", 4111)
                call.record_response(finish_reasons=list(REASONS), input_tokens=10, output_tokens=5)
    # One library per hostile schema URL, and one with OpenTelemetry's.
    for index, url in enumerate(HOSTILE_SCHEMA_URLS):
        tracer = provider.get_tracer(f"hostile.lib{index}", "1.0", url)
        with tracer.start_as_current_span("agent.iteration", attributes={sc.AGENTDIAG_KIND: sc.KIND_ITERATION}):
            pass
    tracer = provider.get_tracer("conventional.lib", "1.0", OTEL_SCHEMA)
    with tracer.start_as_current_span("agent.iteration", attributes={sc.AGENTDIAG_KIND: sc.KIND_ITERATION}):
        pass


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    store_path = tmp_path_factory.mktemp("closed") / "store" / "traces.db"
    with pytest.MonkeyPatch.context() as env, OTLPReceiver() as receiver:
        for name in list(os.environ):
            if name.startswith(("OTEL_", "AGENTDIAG_")):
                env.delenv(name)
        resource = Resource(
            {
                "service.name": "closed-vocab",
                "telemetry.sdk.language": "python",
                **dict.fromkeys(HOSTILE_RESOURCE_KEYS, "x"),
            },
            RESOURCE_SCHEMA,
        )
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        handle = agentdiag.configure(
            store=store_path,
            hash_key=HASH_KEY,
            otlp_endpoint=receiver.endpoint,
            tracer_provider=provider,
            set_global=False,
        )
        try:
            _agent(provider)
            assert handle.force_flush()
            result = Run(store_path, _files(store_path.parent))
        finally:
            handle.shutdown()
        # run, iterations, llm; the hostile libraries; the OTel one
        expected = 1 + len(CHUNKS) + 2 + len(HOSTILE_SCHEMA_URLS) + 1
        assert receiver.wait_for_spans(expected, timeout=WAIT_S), receiver.span_count
        assert receiver.errors == []
        result.files_after = _files(store_path.parent)
        result.received = receiver.spans()
        result.bodies = list(receiver.decoded_bodies)
    yield result


def _counters(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k[len(REDACTION) :]: v for k, v in attributes.items() if k.startswith(REDACTION)}


# -- the store -------------------------------------------------------------------------------------------------
def test_no_marker_in_any_file_of_the_store_while_open_and_after(run: Run) -> None:
    assert {"traces.db", "traces.db-wal"} <= set(run.files_while_open), sorted(run.files_while_open)
    for when, files in (("while open", run.files_while_open), ("after shutdown", run.files_after)):
        for name, blob in files.items():
            assert _leaks(blob) == [], f"{name} {when}"
    # The search is meaningful: what is allowed out is in the same bytes.
    everything = b"".join(run.files_while_open.values()) + b"".join(run.files_after.values())
    for allowed in (b"gen_ai.usage.input_tokens", b"llm.token_count.total", b"_OTHER", b"telemetry.sdk.language"):
        assert allowed in everything, allowed


def test_the_stored_llm_span_keeps_the_enumerated_keys_and_counts_the_rest(run: Run) -> None:
    with SpanStore(run.store_path, create=False) as store:
        spans = [span for t in store.list_traces() for span in store.get_trace(t.trace_id)]
    (llm,) = [span for span in spans if span.kind == sc.KIND_LLM]
    assert llm.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert llm.attributes["llm.token_count.total"] == 15
    assert llm.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == [
        "stop",
        *[sc.OTHER_VALUE] * len(DATA_FINISH_REASONS),
        "length",
    ]
    assert llm.attributes["llm.finish_reason"] == sc.OTHER_VALUE
    counters = _counters(llm.attributes)
    assert counters["unknown_key"] == 1
    assert counters["invalid_value"] == 2
    assert counters["schema_url"] == 1  # the resource's
    carriers = [span for span in spans if span.attributes.get(sc.AGENTDIAG_ITERATION_INDEX, len(CHUNKS)) < len(CHUNKS)]
    assert len(carriers) == len(CHUNKS)
    assert sum(_counters(span.attributes)["unknown_key"] for span in carriers) == len(HOSTILE_SPAN_KEYS)
    assert not [key for span in spans for key in span.attributes if key in set(HOSTILE_SPAN_KEYS)]


# -- OTLP --------------------------------------------------------------------------------------------------------
def test_no_marker_in_any_otlp_body(run: Run) -> None:
    assert run.bodies
    for index, body in enumerate(run.bodies):
        assert _leaks(body) == [], f"request body {index}"
    assert any(OTEL_SCHEMA.encode() in body for body in run.bodies)  # the kept one is visible in the same bytes


def test_only_the_opentelemetry_schema_url_reaches_the_receiver(run: Run) -> None:
    urls: set[str] = set()
    for body in run.bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            urls.add(resource_spans.schema_url)
            urls.update(scope_spans.schema_url for scope_spans in resource_spans.scope_spans)
    assert urls == {"", OTEL_SCHEMA}


def test_the_receiver_sees_each_removal_counted(run: Run) -> None:
    ours = [span for span in run.received if span.scope_name == "otel_agentdiag"]
    others = {span.scope_name: span for span in run.received if span.scope_name != "otel_agentdiag"}
    (llm,) = [span for span in ours if span.name == "chat gpt-4o-mini"]
    assert llm.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == (
        "stop",
        *[sc.OTHER_VALUE] * len(DATA_FINISH_REASONS),
        "length",
    )
    assert llm.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert llm.attributes["llm.finish_reason"] == sc.OTHER_VALUE
    assert _counters(llm.attributes) == {"unknown_key": 1, "invalid_value": 2, "schema_url": 1, "hashed": 1}
    carriers = [span for span in ours if span.attributes.get(sc.AGENTDIAG_ITERATION_INDEX, len(CHUNKS)) < len(CHUNKS)]
    assert len(carriers) == len(CHUNKS)
    assert sum(_counters(span.attributes)["unknown_key"] for span in carriers) == len(HOSTILE_SPAN_KEYS)
    assert not [key for span in run.received for key in span.attributes if key in set(HOSTILE_SPAN_KEYS)]
    for index in range(len(HOSTILE_SCHEMA_URLS)):
        counters = _counters(others[f"hostile.lib{index}"].attributes)
        assert counters["schema_url"] == 2, index  # resource and scope
    assert _counters(others["conventional.lib"].attributes)["schema_url"] == 1  # the resource only
    for span in run.received:
        assert set(span.resource) <= {"service.name", "service.instance.id", "telemetry.sdk.language"}
        assert span.resource["telemetry.sdk.language"] == "python"


# -- export -------------------------------------------------------------------------------------------------------
def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _export(store: Path, out: Path, output_format: str) -> bytes:
    env = {"AGENTDIAG_HASH_KEY": HASH_KEY}
    result = CliRunner(env=env).invoke(
        cli, ["export", "--store", str(store), "--format", output_format, "--out", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def test_every_export_format_revalidates_keys_and_reasons_an_older_version_stored(run: Run, tmp_path: Path) -> None:
    """A store written while a ``*`` let ``gen_ai.usage.<anything>`` in: export re-validates every row."""
    store = tmp_path / "legacy" / "traces.db"
    store.parent.mkdir(mode=0o700)
    store.write_bytes(run.files_after["traces.db"])
    store.chmod(0o600)
    planted = {
        key: 4111 for key in data_keys((sc.GEN_AI_USAGE_PREFIX, "llm.token_count.", sc.AGENTDIAG_REDACTION_PREFIX))
    }
    conn = sqlite3.connect(store)
    with conn:
        rows = conn.execute("SELECT rowid, attributes FROM spans WHERE kind = ?", (sc.KIND_LLM,)).fetchall()
        assert len(rows) == 1
        ((rowid, text),) = rows
        attributes = {**json.loads(text), **planted, sc.GEN_AI_RESPONSE_FINISH_REASONS: list(REASONS)}
        conn.execute("UPDATE spans SET attributes = ? WHERE rowid = ?", (json.dumps(attributes), rowid))
    conn.close()
    assert _leaks(store.read_bytes() + b"".join(p.read_bytes() for p in store.parent.glob("*-wal")))  # planted
    for output_format in ("otlp-json", "jaeger-json", "bundle"):
        blob = _export(store, tmp_path / f"out.{output_format}", output_format)
        assert _leaks(blob) == [], output_format
        assert b"gen_ai.usage.input_tokens" in blob and b"_OTHER" in blob, output_format


# -- ingest -------------------------------------------------------------------------------------------------------
def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": value}


def _otlp_json(urls: list[str]) -> dict[str, Any]:
    resource_spans = []
    for index, url in enumerate(urls):
        attributes = {
            sc.GEN_AI_OPERATION_NAME: "chat",
            sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
            sc.GEN_AI_USAGE_INPUT_TOKENS: 3,
            sc.GEN_AI_RESPONSE_FINISH_REASONS: list(REASONS),
            **dict.fromkeys(HOSTILE_SPAN_KEYS, 7),
        }
        resource = {
            "attributes": [
                {"key": k, "value": _value(v)}
                for k, v in {"service.name": "imported", **dict.fromkeys(HOSTILE_RESOURCE_KEYS, "x")}.items()
            ]
        }
        span = {
            "traceId": f"{index + 1:032x}",
            "spanId": f"{index + 1:016x}",
            "name": "chat gpt-4o-mini",
            "kind": 3,
            "startTimeUnixNano": "1700000100000000000",
            "endTimeUnixNano": "1700000100090000000",
            "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
        }
        scope_spans = {"scope": {"name": f"imported.lib{index}", "version": "1.0"}, "schemaUrl": url, "spans": [span]}
        resource_spans.append({"resource": resource, "schemaUrl": url, "scopeSpans": [scope_spans]})
    return {"resourceSpans": resource_spans}


def test_ingest_applies_the_same_checks_to_imported_spans(tmp_path: Path) -> None:
    urls = [*HOSTILE_SCHEMA_URLS, OTEL_SCHEMA]
    source = tmp_path / "imported.otlp.jsonl"
    source.write_text(json.dumps(_otlp_json(urls)) + "\n", encoding="utf-8")
    assert _leaks(source.read_bytes())  # the file does carry them
    store = tmp_path / "ingested" / "traces.db"
    result = _invoke("ingest", source, "--store", store, "--max-session-age", "none")
    assert result.exit_code == 0, result.output
    assert _leaks(b"".join(_files(store.parent).values())) == []
    with SpanStore(store, create=False) as opened:
        spans = {span.span_id: span for t in opened.list_traces() for span in opened.get_trace(t.trace_id)}
    assert len(spans) == len(urls)
    for index, url in enumerate(urls):
        span = spans[f"{index + 1:016x}"]
        assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3
        assert span.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == [
            "stop",
            *[sc.OTHER_VALUE] * len(DATA_FINISH_REASONS),
            "length",
        ]
        counters = _counters(span.attributes)
        assert counters["unknown_key"] == len(HOSTILE_SPAN_KEYS), url
        assert counters.get("schema_url") == (None if url == OTEL_SCHEMA else 2), url

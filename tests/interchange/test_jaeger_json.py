"""Jaeger-JSON: the shape Jaeger UI's "upload JSON" and Grafana's Jaeger "Import trace" read, in microseconds, with
references that match the parents; checked on a real store's strict projection, on hand-made edge cases and on
the README's example."""

from __future__ import annotations

import json
import math
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.projection import load_store_hasher, strict_projection
from otel_agentdiag.interchange.jaeger_json import jaeger_document, write_jaeger_json
from otel_agentdiag.storage import SpanStore

KEY = "d71abe986b871b20ae635742c3c22f7c15a8f06ce32a92fb26363cdd97b78994"
AGENT = "jaeger-agent"
TOOL = "fetch_rates"
README = Path(__file__).parents[2] / "docs" / "cli.md"  # the example moved there from the README
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")
TAG_TYPES = {"string": str, "bool": bool, "int64": int, "float64": float, "binary": str}

agentdiag.register_names(tools=[TOOL], agents=[AGENT])


def assert_tags(tags: Any) -> None:
    assert isinstance(tags, list)
    for tag in tags:
        assert set(tag) == {"key", "type", "value"}, tag
        assert isinstance(tag["key"], str) and tag["key"]
        expected = TAG_TYPES[tag["type"]]
        assert type(tag["value"]) is expected or (expected is float and type(tag["value"]) is int), tag


def assert_jaeger_shape(document: Any) -> dict[str, dict[str, Any]]:
    """Every key and type the Jaeger UI and Grafana read; returns the spans by span id."""
    assert isinstance(document, dict) and isinstance(document["data"], list) and document["data"]
    by_id: dict[str, dict[str, Any]] = {}
    for entry in document["data"]:
        assert set(entry) >= {"traceID", "spans", "processes", "warnings"}
        assert HEX32.fullmatch(entry["traceID"])
        processes = entry["processes"]
        assert isinstance(processes, dict) and processes
        for process in processes.values():
            assert set(process) == {"serviceName", "tags"}
            assert isinstance(process["serviceName"], str) and process["serviceName"]
            assert_tags(process["tags"])
        ids = {span["spanID"] for span in entry["spans"]}
        for span in entry["spans"]:
            assert set(span) == {
                "traceID",
                "spanID",
                "operationName",
                "references",
                "startTime",
                "duration",
                "tags",
                "logs",
                "processID",
                "warnings",
                "flags",
            }, span.keys()
            assert span["traceID"] == entry["traceID"]
            assert HEX16.fullmatch(span["spanID"])
            assert isinstance(span["operationName"], str)
            assert type(span["startTime"]) is int and span["startTime"] > 10**15  # µs since the epoch, not ns or s
            assert span["startTime"] < 10**17
            assert type(span["duration"]) is int and span["duration"] >= 0
            assert span["processID"] in processes
            assert span["warnings"] is None or all(isinstance(w, str) for w in span["warnings"])
            assert type(span["flags"]) is int
            assert_tags(span["tags"])
            for log in span["logs"]:
                assert set(log) == {"timestamp", "fields"}
                assert type(log["timestamp"]) is int and log["timestamp"] > 10**15
                assert_tags(log["fields"])
                assert log["fields"][0]["key"] == "event"
            children_of = [r for r in span["references"] if r["refType"] == "CHILD_OF"]
            assert len(children_of) <= 1
            for reference in span["references"]:
                assert set(reference) == {"refType", "traceID", "spanID"}
                assert reference["refType"] in ("CHILD_OF", "FOLLOWS_FROM")
                assert HEX32.fullmatch(reference["traceID"]) and HEX16.fullmatch(reference["spanID"])
            for reference in children_of:
                assert reference["traceID"] == entry["traceID"]
                assert reference["spanID"] in ids  # the parent is in the trace
            by_id[span["spanID"]] = span
    return by_id


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "traces.db"
    with agentdiag.configure(store=path, hash_key=KEY, set_global=False, service_name="jaeger-svc"):
        with agentdiag.agent_run(AGENT, conversation_id="conv-j"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(finish_reasons=["tool_calls", "stop"], input_tokens=3, output_tokens=2)
                try:
                    with agentdiag.tool_call(TOOL, call_id="c-1"):
                        raise TimeoutError("rates service timed out")
                except TimeoutError:
                    pass
    return path


def test_a_projection_writes_the_shape_jaeger_and_grafana_read(store: Path, tmp_path: Path) -> None:
    with SpanStore(store, create=False) as s:
        rows = [span for t in s.list_traces() for span in s.get_trace(t.trace_id)]
    spans = strict_projection(rows, hasher=load_store_hasher(store)).spans
    out = tmp_path / "trace.jaeger.json"
    size = write_jaeger_json(spans, out)
    assert size == out.stat().st_size
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    document = json.loads(out.read_text(encoding="utf-8"))
    by_id = assert_jaeger_shape(document)
    assert len(by_id) == len(rows) == 4
    (entry,) = document["data"]
    assert entry["processes"] == {
        "p1": {
            "serviceName": "jaeger-svc",
            "tags": [
                {"key": k, "type": "string", "value": v}
                for k, v in spans[0].resource.attributes.items()
                if k != "service.name" and isinstance(v, str)
            ],
        }
    }
    for row in rows:
        span = by_id[row.span_id]
        assert span["operationName"] == row.name
        assert span["startTime"] == row.start_ns // 1000
        assert row.end_ns is not None
        assert span["duration"] == row.end_ns // 1000 - row.start_ns // 1000
        parents = [r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF"]
        assert parents == ([] if row.parent_span_id is None else [row.parent_span_id])
        tags = {t["key"]: t for t in span["tags"]}
        assert tags["span.kind"]["value"] == row.span_kind
        assert tags[sc.AGENTDIAG_SEQUENCE] == {"key": sc.AGENTDIAG_SEQUENCE, "type": "int64", "value": row.sequence}
    tool = next(s for s in by_id.values() if s["operationName"] == f"execute_tool {TOOL}")
    tags = {t["key"]: t["value"] for t in tool["tags"]}
    assert tags["otel.status_code"] == "ERROR" and tags["error"] is True
    assert tags["otel.scope.name"] == "otel_agentdiag"
    (log,) = tool["logs"]
    assert log["fields"][0] == {"key": "event", "type": "string", "value": "exception"}
    assert {"key": "exception.type", "type": "string", "value": "TimeoutError"} in log["fields"]
    llm = next(s for s in by_id.values() if s["operationName"] == "chat gpt-4o-mini")
    finish = next(t for t in llm["tags"] if t["key"] == sc.GEN_AI_RESPONSE_FINISH_REASONS)
    assert finish == {"key": sc.GEN_AI_RESPONSE_FINISH_REASONS, "type": "string", "value": '["tool_calls", "stop"]'}
    assert "timed out" not in out.read_text()  # the strict projection: exception messages never leave


def _span(
    span_id: int,
    *,
    parent: int | None = None,
    end: int | None = 1_700_000_000_002_500_999,
    resource: Resource | None = None,
    **extra: Any,
) -> ReadableSpan:
    trace_id = 0x0AF7651916CD43DD8448EB211C80319C
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
    return ReadableSpan(
        name=f"span-{span_id}",
        context=trace.SpanContext(trace_id, span_id, False, flags),
        parent=None if parent is None else trace.SpanContext(trace_id, parent, False, flags),
        resource=resource or Resource({"service.name": "svc-a"}),
        start_time=1_700_000_000_000_000_999,
        end_time=end,
        **extra,
    )


def test_links_unfinished_spans_processes_and_every_tag_type() -> None:
    other = Resource({"service.name": "svc-b", "host.arch": "amd64"})
    link = trace.Link(trace.SpanContext(0x1 << 100, 0x22, True, trace.TraceFlags(1)), {"why": "retry"})
    spans = [
        _span(0xA1, kind=SpanKind.SERVER, status=Status(StatusCode.OK)),
        _span(
            0xA2,
            parent=0xA1,
            end=None,
            resource=other,
            kind=SpanKind.CLIENT,
            links=[link],
            attributes={"b": True, "i": 7, "f": 0.5, "nan": math.nan, "s": "x", "raw": b"\x01\xff", "arr": (1, 2)},
            events=[Event("retry", {"attempt": 2}, 1_700_000_000_001_000_000)],
            instrumentation_scope=InstrumentationScope("lib", "2.0"),
            status=Status(StatusCode.ERROR, "failed"),
        ),
    ]
    document = jaeger_document(spans)
    json.dumps(document, allow_nan=False)  # valid JSON: no NaN
    by_id = assert_jaeger_shape(document)
    root, child = by_id[f"{0xA1:016x}"], by_id[f"{0xA2:016x}"]
    assert root["startTime"] == 1_700_000_000_000_000 and root["duration"] == 2_500  # µs, truncated
    assert root["warnings"] is None
    assert child["duration"] == 0 and child["warnings"] == ["the span never ended: its duration is unknown"]
    assert child["references"] == [
        {"refType": "CHILD_OF", "traceID": "0af7651916cd43dd8448eb211c80319c", "spanID": f"{0xA1:016x}"},
        {"refType": "FOLLOWS_FROM", "traceID": f"{1 << 100:032x}", "spanID": f"{0x22:016x}"},
    ]
    (entry,) = document["data"]
    assert entry["processes"] == {
        "p1": {"serviceName": "svc-a", "tags": []},
        "p2": {"serviceName": "svc-b", "tags": [{"key": "host.arch", "type": "string", "value": "amd64"}]},
    }
    assert (root["processID"], child["processID"]) == ("p1", "p2")
    tags = {t["key"]: (t["type"], t["value"]) for t in child["tags"]}
    assert tags == {
        "b": ("bool", True),
        "i": ("int64", 7),
        "f": ("float64", 0.5),
        "nan": ("string", "nan"),
        "s": ("string", "x"),
        "raw": ("binary", "01ff"),
        "arr": ("string", "[1, 2]"),
        "span.kind": ("string", "client"),
        "otel.status_code": ("string", "ERROR"),
        "error": ("bool", True),
        "otel.status_description": ("string", "failed"),
        "otel.scope.name": ("string", "lib"),
        "otel.scope.version": ("string", "2.0"),
    }
    assert {t["key"]: t["value"] for t in root["tags"]} == {"span.kind": "server", "otel.status_code": "OK"}
    assert child["logs"] == [
        {
            "timestamp": 1_700_000_000_001_000,
            "fields": [
                {"key": "event", "type": "string", "value": "retry"},
                {"key": "attempt", "type": "int64", "value": 2},
            ],
        }
    ]


def test_spans_of_several_traces_become_several_entries() -> None:
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
    spans = [
        ReadableSpan(
            name=f"t{t}",
            context=trace.SpanContext(t, 5, False, flags),
            resource=Resource({}),
            start_time=10**18,
            end_time=10**18,
        )
        for t in (3, 1, 3)
    ]
    document = jaeger_document(spans)
    assert [e["traceID"] for e in document["data"]] == [f"{3:032x}", f"{1:032x}"]  # first seen first
    assert [len(e["spans"]) for e in document["data"]] == [2, 1]
    assert document["data"][0]["processes"]["p1"]["serviceName"] == "unknown_service"


def test_the_readme_example_has_the_shape_it_documents() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Move traces: OTLP-JSON, Jaeger-JSON and `agentdiag ingest`", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    jaeger = [json.loads(block) for block in blocks if block.lstrip().startswith('{"data"')]
    assert len(jaeger) == 1
    by_id = assert_jaeger_shape(jaeger[0])
    assert len(by_id) == 2
    otlp = [json.loads(block) for block in blocks if block.lstrip().startswith('{"resourceSpans"')]
    assert len(otlp) == 1

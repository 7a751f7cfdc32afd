"""OTLP-JSON: the file is the OTLP ExportTraceServiceRequest JSON encoding (checked against protobuf's own parser
and a real OTLP/HTTP receiver), it reads back line by line, and store -> OTLP-JSON -> ingest into a fresh store is
a transparent copy of the span tree.

Stores are real SQLite files written by ``configure()`` and the manual wrappers; rotel is the independent Rust
OTLP receiver from tests/e2e/rotel_collector.py.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.projection import load_store_hasher, strict_projection
from otel_agentdiag.diagnostics.receipt import session_receipt, store_receipt
from otel_agentdiag.interchange import otlp_json
from otel_agentdiag.interchange.ingest import imported_observer, ingest_otlp_json
from otel_agentdiag.interchange.otlp_json import (
    INVALID_ID,
    INVALID_SPAN,
    INVALID_TIME,
    LINE_TOO_LONG,
    MALFORMED_JSON,
    NOT_OTLP,
    InvalidRequest,
    read_otlp_json,
    request_to_spans,
    write_otlp_json,
)
from otel_agentdiag.storage import SpanStore, StoredSpan

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from rotel_collector import RotelCollector, unavailable_reason

KEY = "ae5c18bf9a062e8dc6853f5832dbd22db3547bdda8c7b4603975e63c365dad94"
AGENT = "interchange-agent"
TOOL = "lookup_order"
FIXTURES = Path(__file__).parent / "fixtures"

agentdiag.register_names(tools=[TOOL], agents=[AGENT])


def run_agent(store: Path, conversation_id: str, *, hash_key: str | None = KEY) -> None:
    """One run: two iterations, LLM calls with usage and finish reasons, a tool call that fails and one that works."""
    with agentdiag.configure(store=store, hash_key=hash_key, set_global=False, service_name="interchange-svc"):
        with agentdiag.agent_run(AGENT, conversation_id=conversation_id, user_id="user-77"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.span.set_attribute(sc.SERVER_ADDRESS, "api.internal.example")
                    call.record_response(finish_reasons=["tool_calls"], input_tokens=12, output_tokens=5)
                try:
                    with agentdiag.tool_call(TOOL, call_id="call-1"):
                        raise LookupError("order 123 not found")
                except LookupError:
                    pass
            with agentdiag.iteration(1):
                with agentdiag.tool_call(TOOL, call_id="call-2"):
                    pass
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(finish_reasons=["stop"], input_tokens=20, output_tokens=7)


def all_rows(path: Path) -> list[StoredSpan]:
    with SpanStore(path, create=False) as store:
        return [span for t in store.list_traces() for span in store.get_trace(t.trace_id)]


def projection_of(path: Path) -> list[ReadableSpan]:
    projection = strict_projection(all_rows(path), hasher=load_store_hasher(path))
    assert projection.omitted == 0
    return projection.spans


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def walk_keys(value: Any) -> list[str]:
    """Every key of every JSON object in ``value`` (not the ``key`` *values* of attributes)."""
    if isinstance(value, dict):
        return [k for k in value] + [k for v in value.values() for k in walk_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in walk_keys(v)]
    return []


def to_protobuf_json(document: dict[str, Any]) -> str:
    """An OTLP/JSON document in protobuf's own JSON mapping (ids base64), for ``json_format.Parse``."""
    copy = json.loads(json.dumps(document))
    for resource_spans in copy["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for holder in (span, *span.get("links", [])):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in holder:
                            holder[key] = base64.b64encode(bytes.fromhex(holder[key])).decode()
    return json.dumps(copy)


def flat(request: ExportTraceServiceRequest) -> list[tuple[bytes, bytes, bytes]]:
    """(resource, scope, span) of every span, serialized deterministically and sorted: a request's content."""
    out = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.append(
                    (
                        rs.resource.SerializeToString(deterministic=True),
                        ss.scope.SerializeToString(deterministic=True),
                        span.SerializeToString(deterministic=True),
                    )
                )
    return sorted(out)


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with two runs of two sessions, written with the key in AGENTDIAG_HASH_KEY."""
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", KEY)
    path = tmp_path / "source" / "traces.db"
    run_agent(path, "conversation-a", hash_key=None)
    run_agent(path, "conversation-b", hash_key=None)
    return path


# -- the written file ------------------------------------------------------------------------------------------
def test_the_file_is_otlp_json_lines_that_protobuf_parses_back_to_the_encoded_request(
    source: Path, tmp_path: Path
) -> None:
    spans = projection_of(source)
    out = tmp_path / "export.otlp.jsonl"
    size = write_otlp_json(spans, out)
    assert size == out.stat().st_size > 0
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n")
    documents = lines_of(out)
    assert len(documents) == 2  # one request per trace
    parsed = ExportTraceServiceRequest()
    for line, document in zip(text.splitlines(), documents, strict=True):
        assert line == json.dumps(document, separators=(",", ":"), ensure_ascii=False)  # compact, one per line
        keys = set(walk_keys(document))
        assert {"resourceSpans", "scopeSpans", "traceId", "spanId", "startTimeUnixNano", "endTimeUnixNano"} <= keys
        assert not {k for k in keys if "_" in k}, "keys are lowerCamelCase"
        trace_ids = set()
        for resource_spans in document["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    trace_ids.add(span["traceId"])
                    assert len(span["traceId"]) == 32 and set(span["traceId"]) <= set("0123456789abcdef")
                    assert len(span["spanId"]) == 16 and set(span["spanId"]) <= set("0123456789abcdef")
                    if "parentSpanId" in span:
                        assert len(span["parentSpanId"]) == 16 and set(span["parentSpanId"]) <= set("0123456789abcdef")
                    assert isinstance(span["kind"], int) and 1 <= span["kind"] <= 5  # enums as integers
                    if "code" in span.get("status", {}):
                        assert isinstance(span["status"]["code"], int)
                    assert int(span["startTimeUnixNano"]) > 0
        assert len(trace_ids) == 1
        one = ExportTraceServiceRequest()
        json_format.Parse(to_protobuf_json(document), one)
        parsed.resource_spans.extend(one.resource_spans)
    assert flat(parsed) == flat(encode_spans(spans))  # every span, exactly as the SDK's OTLP encoder makes it


def test_the_file_is_private_and_replaced_atomically(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.otlp.jsonl"
    out.write_text("old content\n")
    os.chmod(out, 0o644)
    write_otlp_json(projection_of(source), out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "old content" not in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.otlp.jsonl", "source"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "export.otlp.jsonl"
    out.write_text("old content\n")

    def fail(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(otlp_json.os, "fsync", fail)
    with pytest.raises(OSError):
        write_otlp_json(projection_of(source), out)
    assert out.read_text() == "old content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.otlp.jsonl", "source"]


def test_large_traces_are_split_into_requests_of_at_most_the_line_limit(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp_json, "SPANS_PER_LINE", 5)
    spans = projection_of(source)
    out = tmp_path / "split.jsonl"
    write_otlp_json(spans, out)
    counts = [sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]) for doc in lines_of(out)]
    assert max(counts) == 5 and sum(counts) == len(spans)
    assert sum(1 for line in read_otlp_json(out) if line.request is not None) == len(counts)


# -- the round trip ---------------------------------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(dict(value or {})))


def test_store_to_otlp_json_to_a_fresh_store_is_a_transparent_copy_filed_as_imported(
    source: Path, tmp_path: Path
) -> None:
    spans = projection_of(source)
    out = tmp_path / "export.otlp.jsonl"
    write_otlp_json(spans, out)
    copy = tmp_path / "copy" / "traces.db"
    result = ingest_otlp_json(out, copy, trust_names=True)  # names are data unless trusted (see below)
    assert result.clean and result.rejected == []
    assert result.spans == result.inserted == len(spans) == 14
    assert result.numbered == 0  # every span kept the number it had, under its re-keyed observer
    assert result.claimed_observers == len({r.observer for r in all_rows(source)}) == 2
    assert result.duplicates == result.pruned == result.redaction_failures == 0

    original = {(r.trace_id, r.span_id): r for r in all_rows(source)}
    copied = {(r.trace_id, r.span_id): r for r in all_rows(copy)}
    assert copied.keys() == original.keys()
    hasher = load_store_hasher(copy)
    assert hasher is not None
    for key, row in copied.items():
        before = original[key]
        for name in ("parent_span_id", "name", "kind", "span_kind", "start_ns", "end_ns", "status"):
            assert getattr(row, name) == getattr(before, name), name
        assert row.session == f"imported:{before.session}" and row.imported and not before.imported
        assert before.observer is not None and row.observer == imported_observer(hasher, before.observer)
        assert row.observer != before.observer and row.sequence == before.sequence
        assert row.scope == before.scope
    projected = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"): s for s in spans if s.context}
    for key, row in copied.items():
        # The copy holds what the strict projection exported, after the local policy: the same attributes, but
        # for the observer id, re-keyed (a file's claim to be one of this machine's pipelines proves nothing).
        span = projected[key]
        assert row.attributes == {**_jsonable(span.attributes), sc.AGENTDIAG_OBSERVER_ID: row.observer}
        assert row.events == [
            {"name": e.name, "time_ns": e.timestamp, "attributes": _jsonable(e.attributes)} for e in span.events
        ]
        assert row.resource == _jsonable(span.resource.attributes)
    tools = [r for r in copied.values() if r.kind == "tool"]
    assert {r.name for r in tools} == {f"execute_tool {TOOL}"}  # trusted names are kept
    assert any(r.attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS) == 12 for r in copied.values())

    with SpanStore(source, create=False) as a, SpanStore(copy, create=False) as b:
        sessions = sorted(s.session for s in a.list_sessions() if s.session)
        assert len(sessions) == 2
        assert sorted(s.session for s in b.list_sessions() if s.session) == [f"imported:{s}" for s in sessions]
        for session in sessions:
            receipt = session_receipt(b, f"imported:{session}")
            # Complete by its own numbering, and never "valid": nothing here observed it.
            assert (receipt.status, receipt.reasons, receipt.provenance) == ("imported", ["imported"], "imported")
            assert receipt.observers == [imported_observer(hasher, o) for o in session_receipt(a, session).observers]
        whole = store_receipt(b)
        assert (whole.status, whole.provenance) == ("imported", "imported")
        recorded = {o.observer: o.imported for o in b.observers()}
        assert set(whole.observers) <= set(recorded) and all(recorded.values())  # the ingest's own one too


def test_without_trust_names_the_names_of_a_file_are_data(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.otlp.jsonl"
    write_otlp_json(projection_of(source), out)
    copy = tmp_path / "copy" / "traces.db"
    assert ingest_otlp_json(out, copy).clean
    rows = all_rows(copy)
    assert {r.name for r in rows if r.kind == "tool"} == {"execute_tool _OTHER"}
    assert {r.attributes.get(sc.GEN_AI_AGENT_NAME) for r in rows if r.kind == "run"} == {"_OTHER"}


def test_with_another_key_the_tree_is_the_same_and_the_digests_are_rekeyed(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans = projection_of(source)
    out = tmp_path / "export.otlp.jsonl"
    write_otlp_json(spans, out)
    monkeypatch.delenv("AGENTDIAG_HASH_KEY")
    copy = tmp_path / "other" / "traces.db"
    result = ingest_otlp_json(out, copy, trust_names=True)
    assert result.clean
    assert (copy.parent / "hash.key").is_file()  # the store's own key, created as configure() would
    original = {(r.trace_id, r.span_id): r for r in all_rows(source)}
    copied = {(r.trace_id, r.span_id): r for r in all_rows(copy)}
    assert copied.keys() == original.keys()
    for key, row in copied.items():
        before = original[key]
        assert (row.parent_span_id, row.name, row.start_ns, row.end_ns) == (
            before.parent_span_id,
            before.name,
            before.start_ns,
            before.end_ns,
        )
        assert row.session is not None and before.session is not None
        assert row.session != f"imported:{before.session}"  # re-keyed: the copy cannot be joined with the source
        assert row.session.split(":")[2] == load_store_hasher(copy).key_id  # type: ignore[union-attr]
    with SpanStore(copy, create=False) as b:
        assert store_receipt(b).status == "imported"


# -- an independent receiver reads it --------------------------------------------------------------------------
def test_rotel_accepts_an_exported_line_over_otlp_http_json(source: Path, tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "export.otlp.jsonl"
    write_otlp_json(projection_of(source), out)
    line = out.read_text(encoding="utf-8").splitlines()[0]
    document = json.loads(line)
    expected = {
        span["spanId"]: span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
    }
    with RotelCollector(tmp_path / "rotel") as rotel:
        url = f"{rotel.http_endpoint}/v1/traces"

        def post(body: bytes) -> int:
            request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return int(response.status)
            except urllib.error.HTTPError as exc:
                return int(exc.code)

        assert post(b"{}") == 400  # rotel is strict: a body that is not a request is refused
        assert post(line.encode("utf-8")) == 200
        assert rotel.wait_for_spans(len(expected), timeout=10), rotel.log_text()[-2000:]
        received = rotel.spans()
    assert len(received) == len(expected)
    for span in received:
        sent = expected[span["span_id"]]
        assert span["trace_id"] == sent["traceId"]
        assert span["parent_span_id"] == sent.get("parentSpanId")
        assert span["name"] == sent["name"]
        assert span["kind"] == sent["kind"]
        assert span["attributes"][sc.AGENTDIAG_SEQUENCE] == int(
            next(a["value"]["intValue"] for a in sent["attributes"] if a["key"] == sc.AGENTDIAG_SEQUENCE)
        )
        assert span["resource"]["service.name"] == "interchange-svc"


# -- reading ------------------------------------------------------------------------------------------------------
def _request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]}


def _span(span_id: str = "00000000000000a1", **extra: Any) -> dict[str, Any]:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": span_id,
        "name": "work",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000500000000",
    }
    span.update(extra)
    return span


def test_one_pretty_printed_document_reads_as_one_request() -> None:
    (result,) = list(read_otlp_json(FIXTURES / "foreign_sentinels.otlp.json"))
    assert result.line == 1 and result.reason is None and result.request is not None
    assert len(request_to_spans(result.request)) == 3


def test_every_line_is_judged_on_its_own_by_line_number(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps(_request(_span())),
        "",
        "not json at all",
        json.dumps({"data": []}),  # Jaeger JSON, not OTLP
        json.dumps([_request(_span("00000000000000b1")), {"resourceSpans": "nope"}]),
        json.dumps(_request(_span(spanId="zz"))),
        "   ",
        json.dumps(_request(_span("00000000000000c1"))),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"resourceSpans": "\xff\xfe"}\n')
    results = [(r.location, r.reason) for r in read_otlp_json(path)]
    assert results == [
        ("line 1", None),
        ("line 3", MALFORMED_JSON),
        ("line 4", NOT_OTLP),
        ("line 5 item 1", None),
        ("line 5 item 2", NOT_OTLP),
        ("line 6", INVALID_ID),
        ("line 8", None),
        ("line 9", MALFORMED_JSON),  # not UTF-8
    ]


def test_a_line_too_long_is_rejected_without_being_held_and_reading_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp_json, "MAX_LINE_BYTES", 400)
    path = tmp_path / "long.jsonl"
    long_line = json.dumps(_request(*[_span(f"{i + 1:016x}") for i in range(10)]))
    assert len(long_line) > 1000
    path.write_text("\n".join([json.dumps(_request(_span())), long_line, json.dumps(_request(_span()))]) + "\n")
    assert [(r.location, r.reason) for r in read_otlp_json(path)] == [
        ("line 1", None),
        ("line 2", LINE_TOO_LONG),
        ("line 3", None),
    ]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"traceId": "0af7651916cd43dd8448eb211c80319"}, INVALID_ID),  # 31 digits
        ({"traceId": "0" * 32}, INVALID_ID),
        ({"spanId": base64.b64encode(b"\x01" * 8).decode()}, INVALID_ID),  # base64, as protobuf would write it
        ({"parentSpanId": "0000000000000000"}, INVALID_ID),
        ({"links": [{"traceId": "1" * 32, "spanId": "xyz"}]}, INVALID_ID),
        ({"startTimeUnixNano": "0"}, INVALID_TIME),
        ({"endTimeUnixNano": "1699999999999999999"}, INVALID_TIME),
        ({"events": [{"name": "e"}]}, INVALID_TIME),
        ({"kind": 9}, INVALID_SPAN),
        ({"status": {"code": 7}}, INVALID_SPAN),
        ({"startTimeUnixNano": {"nested": 1}}, NOT_OTLP),
    ],
)
def test_a_span_that_cannot_be_one_rejects_its_request(tmp_path: Path, change: dict[str, Any], reason: str) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(_request(_span(), _span("00000000000000a2", **change))) + "\n")
    (result,) = list(read_otlp_json(path))
    if result.request is not None:
        with pytest.raises(InvalidRequest) as caught:
            request_to_spans(result.request)
        assert caught.value.reason == reason
    else:
        assert result.reason == reason


def test_request_to_spans_keeps_every_part_of_a_span(tmp_path: Path) -> None:
    attributes = [
        {"key": "s", "value": {"stringValue": "text"}},
        {"key": "b", "value": {"boolValue": True}},
        {"key": "i", "value": {"intValue": "-42"}},
        {"key": "d", "value": {"doubleValue": 2.5}},
        {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}, {"stringValue": "y"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "1"}}]}}},
        {"key": "raw", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
        {"key": "empty", "value": {}},
    ]
    child = _span(
        "00000000000000a2",
        parentSpanId="00000000000000a1",
        kind=3,
        endTimeUnixNano="0",
        attributes=attributes,
        events=[{"timeUnixNano": "1700000000100000000", "name": "exception", "attributes": attributes[:1]}],
        links=[{"traceId": "1" * 32, "spanId": "2" * 16, "attributes": attributes[2:3]}],
        status={"code": 2, "message": "boom"},
        flags=0x300,
    )
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "svc"}},
                        {"key": "nested", "value": {"kvlistValue": {"values": []}}},
                    ]
                },
                "schemaUrl": "https://opentelemetry.io/schemas/1.26.0",
                "scopeSpans": [
                    {
                        "scope": {
                            "name": "lib",
                            "version": "1.2",
                            "attributes": [{"key": "x", "value": {"intValue": "1"}}],
                        },
                        "schemaUrl": "https://opentelemetry.io/schemas/1.25.0",
                        "spans": [_span(kind=0), child],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "full.json"
    path.write_text(json.dumps(document, indent=2))
    (result,) = list(read_otlp_json(path))
    assert result.request is not None
    root, span = request_to_spans(result.request)
    assert root.kind is SpanKind.INTERNAL and root.parent is None and root.end_time == 1_700_000_000_500_000_000
    assert span.context is not None and span.parent is not None
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{span.context.span_id:016x}" == "00000000000000a2"
    assert f"{span.parent.span_id:016x}" == "00000000000000a1" and span.parent.is_remote
    assert span.kind is SpanKind.CLIENT
    assert span.start_time == 1_700_000_000_000_000_000 and span.end_time is None  # never ended
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "boom"
    assert dict(span.attributes or {}) == {
        "s": "text",
        "b": True,
        "i": -42,
        "d": 2.5,
        "a": ("x", "y"),
        "kv": {"k": 1},
        "raw": b"\x00\x01",
    }
    (event,) = span.events
    assert (event.name, event.timestamp, dict(event.attributes or {})) == (
        "exception",
        1_700_000_000_100_000_000,
        {"s": "text"},
    )
    (link,) = span.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == ("1" * 32, "2" * 16)
    assert dict(link.attributes or {}) == {"i": -42}
    assert dict(span.resource.attributes) == {"service.name": "svc"}  # a structured resource value cannot be one
    assert span.resource.schema_url == "https://opentelemetry.io/schemas/1.26.0"
    scope = span.instrumentation_scope
    assert scope is not None
    assert (scope.name, scope.version, scope.schema_url) == ("lib", "1.2", "https://opentelemetry.io/schemas/1.25.0")
    assert dict(scope.attributes or {}) == {"x": 1}

"""``push`` and ``export --format otlp-json`` of a store whose rows were edited after they were written.

A real store (the demo run and sessions made through the public API, hash key beside it) has rows edited after
they were written, as someone with the file could: a raw e-mail address put in an attribute the strict policy
keeps, a raw prompt under a content key, a kept key renamed to one no rule knows, a raw foreign session id in
place of the stored digest, a digest made with another key. Every row is re-validated under the strict policy
on every push and export, so:

- ``export --format otlp-json`` writes the SDK encoder's request plus protobuf's JSON mapping (OTLP's hex ids),
  line by line, of the strict projection, and none of the planted values;
- ``push`` to rotel (a real collector on 127.0.0.1) over http/protobuf and gRPC delivers the same spans as a
  plain SDK exporter fed the same projection, and none of the planted values, every time it is pushed;
- push marks name exactly the delivered spans, and a second push sends nothing.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry import trace
from rotel_collector import RotelCollector, unavailable_reason

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.diagnostics.projection import load_store_hasher, strict_projection
from otel_agentdiag.diagnostics.push import endpoint_key, push_exporter, push_spans
from otel_agentdiag.interchange.otlp_json import _chunks
from otel_agentdiag.interchange.otlp_request import request_to_otlp_json, span_encoder
from otel_agentdiag.storage import SpanStore

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or "")

WAIT_S = 20.0
_tag = uuid.uuid4().hex[:10]
EMAIL = f"tamper.{_tag}@example.com"
PROMPT = f"TAMPER_PROMPT_{_tag} please book me a flight"
FOREIGN = f"FOREIGN_SESSION_{_tag}"
RENAMED = f"renamed-model-{_tag}"
FOREIGN_DIGEST = "hmac-sha256:" + "ab" * 32
SENTINELS = (EMAIL, PROMPT, FOREIGN, RENAMED, FOREIGN_DIGEST)


def _set_attributes(conn: sqlite3.Connection, rowid: int, change: Any) -> None:
    (text,) = conn.execute("SELECT attributes FROM spans WHERE rowid = ?", (rowid,)).fetchone()
    attributes = json.loads(text)
    change(attributes)
    conn.execute("UPDATE spans SET attributes = ? WHERE rowid = ?", (json.dumps(attributes), rowid))


def build_tampered_store(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    with agentdiag.configure(service_name="push-fast", store=path, set_global=False) as diag:
        run_demo_agent()
        for n in range(3):
            with agentdiag.agent_run("fast_checker", conversation_id=f"conv-{_tag}-{n}"):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    trace.get_current_span().set_attribute(sc.SERVER_ADDRESS, f"host-{_tag}.internal.example")
                    call.record_response(response_model="gpt-4o-mini", finish_reasons=["stop"])
        diag.force_flush()
    with sqlite3.connect(path) as conn:
        models = [r for (r,) in conn.execute("SELECT rowid FROM spans WHERE attributes LIKE '%gen_ai.request.model%'")]
        sessions = [r for (r,) in conn.execute("SELECT rowid FROM spans WHERE attributes LIKE '%conversation.id%'")]
        assert len(models) >= 3 and len(sessions) >= 3, "precondition: the rows to edit exist"
        _set_attributes(conn, models[0], lambda a: a.__setitem__(sc.GEN_AI_REQUEST_MODEL, EMAIL))
        _set_attributes(conn, models[1], lambda a: a.__setitem__("gen_ai.prompt", PROMPT))
        _set_attributes(conn, models[1], lambda a: a.__setitem__("gen_ai.input.messages", PROMPT))
        _set_attributes(
            conn, models[2], lambda a: a.__setitem__("app.model_name", a.pop(sc.GEN_AI_REQUEST_MODEL) + RENAMED)
        )
        _set_attributes(conn, sessions[0], lambda a: a.__setitem__(sc.GEN_AI_CONVERSATION_ID, FOREIGN))
        _set_attributes(conn, sessions[1], lambda a: a.__setitem__(sc.GEN_AI_CONVERSATION_ID, FOREIGN_DIGEST))
    text = "".join(json.dumps(r) for r in sqlite3.connect(path).execute("SELECT attributes FROM spans"))
    assert all(sentinel in text for sentinel in SENTINELS), "precondition: the store holds every planted value"
    return path


def _slow_lines(path: Path) -> list[str]:
    """The reference lines: the SDK encoder and protobuf's JSON mapping of the strict projection, per chunk."""
    with SpanStore(path, create=False) as store:
        rows = [row for s in store.list_sessions() if s.span_count for row in store.session_spans(s.session)]
    spans = strict_projection(rows, hasher=load_store_hasher(path)).spans
    encode = span_encoder()
    return [
        json.dumps(request_to_otlp_json(encode(chunk)), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        for chunk in _chunks(spans)
    ]


def test_export_otlp_json_writes_the_sdk_encoders_lines_and_no_planted_value(tmp_path: Path) -> None:
    path = build_tampered_store(tmp_path)
    out = tmp_path / "spans.jsonl"
    result = CliRunner().invoke(
        cli, ["export", "--format", "otlp-json", "--out", str(out), "--store", str(path)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    written = out.read_text(encoding="utf-8")
    assert written.splitlines() == _slow_lines(path)
    for sentinel in SENTINELS:
        assert sentinel not in written


def _sdk_exporter(protocol: str, endpoint: str) -> Any:
    """The SDK's own exporter, built here as a user would (not through ``push_exporter``)."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        return Grpc(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http(endpoint=endpoint + "/v1/traces")


def _push(path: Path, exporter: Any, key: str) -> Any:
    with SpanStore(path, create=False) as store:
        result = push_spans(store, exporter, endpoint=key, hasher=load_store_hasher(path), batch_size=5)
    exporter.shutdown()
    return result


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_push_sends_what_the_sdk_exporter_sends_and_marks_it(tmp_path: Path, protocol: str) -> None:
    path = build_tampered_store(tmp_path)
    with RotelCollector(tmp_path / "rotel") as rotel:
        endpoint = rotel.endpoint(protocol)
        key = endpoint_key(endpoint, protocol)
        plain_key = "sha256:" + "0" * 64  # a second set of marks, for the push of the same store by a plain exporter
        first = _push(path, push_exporter(endpoint, protocol), key)
        with SpanStore(path, create=False) as store:
            stored = store.span_count()
        assert first.ok and first.pushed == stored >= 18 and first.omitted == 0
        assert first.batches == -(-stored // 5)
        assert rotel.wait_for_spans(first.pushed, timeout=WAIT_S)
        first_spans = rotel.spans()
        plain = _push(path, _sdk_exporter(protocol, endpoint), plain_key)
        assert plain.ok and (plain.pushed, plain.omitted) == (first.pushed, first.omitted)
        assert rotel.wait_for_spans(first.pushed + plain.pushed, timeout=WAIT_S)
        # A third push under a third key: every row re-validated again, the same spans again.
        third = _push(path, push_exporter(endpoint, protocol), "sha256:" + "2" * 64)
        assert third.ok and (third.pushed, third.omitted) == (first.pushed, first.omitted)
        assert rotel.wait_for_spans(3 * first.pushed, timeout=WAIT_S)
        everything = rotel.spans()
        wire = rotel.spans_path.read_text(encoding="utf-8")
    assert len(everything) == 3 * first.pushed
    plain_spans = everything[len(first_spans) : 2 * first.pushed]
    third_spans = everything[2 * first.pushed :]
    assert (
        sorted(json.dumps(s, sort_keys=True) for s in first_spans)
        == sorted(json.dumps(s, sort_keys=True) for s in plain_spans)
        == sorted(json.dumps(s, sort_keys=True) for s in third_spans)
    )
    for sentinel in SENTINELS:
        assert sentinel not in wire, f"{sentinel} reached the collector"
    delivered = {(s["trace_id"], s["span_id"]) for s in first_spans}
    with SpanStore(path, create=False) as store:
        assert store.pushed_span_ids(key) == delivered
        assert store.push_backlog(key) == (0, len(delivered))
        again = push_spans(store, push_exporter(endpoint, protocol), endpoint=key, hasher=load_store_hasher(path))
    assert again.ok and again.pushed == 0 and again.already_pushed == len(delivered)
